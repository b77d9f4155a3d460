package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	babelmcp "github.com/babelagent/babel/adapter/mcp"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/sandbox"
)

// The input every peer derives its marker from: a marker in the output
// proves the peer ran on this run's data, not that a constant leaked
// through.
const (
	mixedTicket = "ticket-42"
	mixedAPIKey = "sk-test-mixed-7c1e9a4b2f6d8e0a"
)

// mixedHits counts requests by what they were for.
type mixedHits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *mixedHits) add(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[what]++
}

func (h *mixedHits) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.n)
}

// mixedPeers are the real servers on loopback that one topology reaches,
// one per adapter family, and what each of them saw.
type mixedPeers struct {
	hits mixedHits

	httpURL, openapiURL, mcpURL, a2aURL, modelURL, stampURL string
	openapiDoc                                              []byte
	mcpPin                                                  string

	mu         sync.Mutex
	failures   []string // what a peer refused; reported by the test
	authSeen   []string // Authorization headers the model received
	toolsSeen  [][]string
	promptSeen string
}

func (p *mixedPeers) fail(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, fmt.Sprintf(format, args...))
}

// Markers: each is computed from the input in a way only that peer does.
func httpMarker(q string) string    { return "HTTP-" + strings.ToUpper(q) }
func openapiMarker(q string) string { return "OAPI-" + strings.ReplaceAll(q, "-", "_") }
func mcpMarker(q string) string     { return "MCP-" + q + "-" + fmt.Sprint(len(q)*7) }
func a2aMarker(q string) string     { return "A2A-" + strings.Repeat(q[len(q)-2:], 2) }
func stampMarker(ref string) string { return "STAMP-" + ref + "-stamped" }

// jsMarker is what the JavaScript node computes: the input reversed.
func jsMarker(q string) string {
	r := []rune(q)
	slices.Reverse(r)
	return "JS-" + string(r) + "-" + fmt.Sprint(len(q))
}

// pyMarker is what the Python node computes: a prefix of SHA-256.
func pyMarker(q string) string {
	s := sha256.Sum256([]byte(q))
	return "PY-" + hex.EncodeToString(s[:])[:16]
}

func startMixedPeers(t *testing.T) *mixedPeers {
	t.Helper()
	p := &mixedPeers{}
	p.startHTTP(t)
	p.startOpenAPI(t)
	p.startMCP(t)
	p.startA2A(t)
	p.startModel(t)
	p.startStamp(t)
	return p
}

// startHTTP is a plain JSON endpoint (the http adapter).
func (p *mixedPeers) startHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.add("http " + r.Method + " " + r.URL.Path)
		var in struct{ Q string }
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Q != mixedTicket {
			p.fail("http peer: body %v, q %q", err, in.Q)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"http_marker": httpMarker(in.Q)})
	}))
	t.Cleanup(srv.Close)
	p.httpURL = srv.URL
}

// startOpenAPI serves an OpenAPI 3 document and the API it describes.
func (p *mixedPeers) startOpenAPI(t *testing.T) {
	doc, err := os.ReadFile("testdata/mixed/lookup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p.openapiDoc = doc
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.add("openapi " + r.Method + " " + r.URL.Path)
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/openapi.yaml":
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(doc)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/lookup":
			q := r.URL.Query().Get("q")
			if q != mixedTicket || len(r.URL.Query()) != 1 {
				p.fail("openapi peer: query %q", r.URL.RawQuery)
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"openapi_marker": openapiMarker(q)})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	p.openapiURL = srv.URL
}

type mixedSearchIn struct {
	Q string `json:"q" jsonschema:"the ticket reference"`
}

type mixedSearchOut struct {
	MCPMarker string `json:"mcp_marker"`
}

// startMCP is an MCP server built with the official Go SDK over streamable
// HTTP; the pin is computed by the adapter's own Pin.
func (p *mixedPeers) startMCP(t *testing.T) {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "mixed-search", Version: "1"}, nil)
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "search", Description: "Search tickets."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in mixedSearchIn) (*mcpsdk.CallToolResult, mixedSearchOut, error) {
			p.hits.add("mcp search ran")
			if in.Q != mixedTicket {
				p.fail("mcp peer: q %q", in.Q)
			}
			return nil, mixedSearchOut{MCPMarker: mcpMarker(in.Q)}, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Count JSON-RPC methods (and session ends) as the server sees them.
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var msg struct{ Method string }
		_ = json.Unmarshal(b, &msg)
		switch {
		case r.Method == http.MethodDelete:
			p.hits.add("mcp session end")
		case msg.Method != "":
			p.hits.add("mcp " + msg.Method)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.mcpURL = srv.URL + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pin, err := babelmcp.Pin(ctx, &babelmcp.Config{URL: p.mcpURL, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}})
	if err != nil {
		t.Fatalf("mcp.Pin: %v", err)
	}
	p.mcpPin = pin
}

// mixedExecutor is an A2A agent (a2a-go SDK) answering with its marker.
type mixedExecutor struct{ p *mixedPeers }

func (e *mixedExecutor) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.p.hits.add("a2a execute")
	var q string
	for _, part := range ec.Message.Parts {
		if m, ok := part.Data().(map[string]any); ok {
			q, _ = m["q"].(string)
		}
	}
	if q != mixedTicket {
		e.p.fail("a2a peer: parts %v", ec.Message.Parts)
	}
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(a2aMarker(q))), nil)
	}
}

func (e *mixedExecutor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.p.hits.add("a2a cancel")
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (p *mixedPeers) startA2A(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.add("a2a " + r.Method + " " + r.URL.Path)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{
		Name:                "Ticket triage",
		Description:         "Triages a ticket.",
		Version:             "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain"},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(&mixedExecutor{p: p})))
	p.a2aURL = srv.URL + "/"
}

// startStamp is the endpoint of the graph's tool, which only the model's
// tool call reaches.
func (p *mixedPeers) startStamp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.add("stamp " + r.Method + " " + r.URL.Path)
		ref := r.URL.Query().Get("ref")
		if ref != mixedTicket {
			p.fail("stamp peer: query %q", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"stamp_marker": stampMarker(ref)})
	}))
	t.Cleanup(srv.Close)
	p.stampURL = srv.URL
}

// startModel is an OpenAI-wire chat completions server (non-streaming).
// Its first answer calls the tool stamp; its second echoes what it was
// given (the prompt and the tool's result), so the run's output shows what
// reached the model.
func (p *mixedPeers) startModel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.add("model " + r.Method + " " + r.URL.Path)
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
			p.fail("model: request %v", err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Function.Name)
		}
		p.mu.Lock()
		p.authSeen = append(p.authSeen, r.Header.Get("Authorization"))
		p.toolsSeen = append(p.toolsSeen, tools)
		p.mu.Unlock()
		if req.Model != "gpt-4o-mini" || req.Stream {
			p.fail("model: model %q stream %v", req.Model, req.Stream)
		}
		w.Header().Set("Content-Type", "application/json")
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" {
			p.mu.Lock()
			p.promptSeen = fmt.Sprint(last.Content)
			p.mu.Unlock()
			args, _ := json.Marshal(map[string]any{"input": map[string]string{"ref": mixedTicket}})
			argStr, _ := json.Marshal(string(args))
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1764400000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_stamp1","type":"function","function":{"name":"stamp","arguments":%s}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":200,"completion_tokens":12,"total_tokens":212}}`, argStr)
			return
		}
		if last.ToolCallID != "call_stamp1" {
			p.fail("model: tool result for call %q", last.ToolCallID)
		}
		p.mu.Lock()
		prompt := p.promptSeen
		p.mu.Unlock()
		answer, _ := json.Marshal("ANSWER prompt=[" + prompt + "] tool=[" + fmt.Sprint(last.Content) + "]")
		fmt.Fprintf(w, `{"id":"chatcmpl-2","object":"chat.completion","created":1764400001,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":260,"completion_tokens":40,"total_tokens":300}}`, answer)
	}))
	t.Cleanup(srv.Close)
	p.modelURL = srv.URL
}

// topology is one graph using every adapter family: a root fans out to an
// http endpoint, an OpenAPI operation, an MCP tool, an A2A agent and code in
// JavaScript and Python; a join waits for all six; an LLM answers last,
// calling the graph's one tool.
func (p *mixedPeers) topology() string {
	priv := egress.AllowPrivateURL
	docDigest := sha256.Sum256(p.openapiDoc)
	return fmt.Sprintf(`name: mixed
description: Every adapter family in one graph.
nodes:
  - name: start
    after: []
    agent: builtin:echo
  - name: via_http
    after: [start]
    agent: {http: {url: "%[1]s/classify"}}
    allow_private: ["%[2]s"]
  - name: via_openapi
    after: [start]
    agent: {openapi: {spec: "%[3]s/openapi.yaml", operation: lookup, digest: "sha256:%[4]s"}}
    allow_private: ["%[5]s"]
  - name: via_mcp
    after: [start]
    agent: "mcp+%[6]s"
    with: {tool: search, pin: "%[7]s"}
    allow_private: ["%[8]s"]
  - name: via_a2a
    after: [start]
    agent: "a2a+%[9]s"
    allow_private: ["%[10]s"]
  - name: via_js
    after: [start]
    agent:
      code:
        lang: js
        source: |
          ({js_marker: "JS-" + input.q.split("").reverse().join("") + "-" + input.q.length})
  - name: via_python
    after: [start]
    agent:
      code:
        lang: python
        source: |
          import hashlib, json, sys
          q = json.load(sys.stdin)["q"]
          print(json.dumps({"python_marker": "PY-" + hashlib.sha256(q.encode()).hexdigest()[:16]}))
  - name: join
    after: [via_http, via_openapi, via_mcp, via_a2a, via_js, via_python]
    barrier: all
    agent: builtin:merge
  - name: answer
    after: [join]
    agent: {llm: {provider: openai, model: gpt-4o-mini, base_url: "%[11]s/v1", stream: false, prompt: "Facts: {{.json}}"}}
    allow_private: ["%[12]s"]
    secrets: [OPENAI_API_KEY]
    tools: [stamp]
tools:
  - name: stamp
    agent: {http: {url: "%[13]s/stamp", method: GET}}
    allow_private: ["%[14]s"]
limits: {deadline: 60s}
`,
		p.httpURL, priv(p.httpURL),
		p.openapiURL, hex.EncodeToString(docDigest[:]), priv(p.openapiURL),
		p.mcpURL, p.mcpPin, priv(p.mcpURL),
		p.a2aURL, priv(p.a2aURL),
		p.modelURL, priv(p.modelURL),
		p.stampURL, priv(p.stampURL))
}

func TestTopologyMixingEveryAdapterRunsWithBabelRun(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bubblewrap is required for the Python code node (CI installs it): %v", err)
	}
	if _, err := os.Stat(sandbox.PythonPath); err != nil {
		t.Fatalf("%s is required for the Python code node (CI installs it): %v", sandbox.PythonPath, err)
	}
	t.Setenv("OPENAI_API_KEY", mixedAPIKey)
	p := startMixedPeers(t)
	f := writeFile(t, "mixed.yaml", p.topology())
	privates := map[string]string{
		"via_http": egress.AllowPrivateURL(p.httpURL), "via_openapi": egress.AllowPrivateURL(p.openapiURL),
		"via_mcp": egress.AllowPrivateURL(p.mcpURL), "via_a2a": egress.AllowPrivateURL(p.a2aURL),
		"answer": egress.AllowPrivateURL(p.modelURL),
	}
	pinHits := p.hits.snapshot() // what computing the MCP pin cost

	// validate and inspect compile the graph: the OpenAPI document is read
	// (it is pinned by digest), and no API, tool, agent or model is called.
	if code, out, errs := babel(t, "", "validate", f); code != 0 || !strings.Contains(out, "mixed: ok (9 nodes)") {
		t.Fatalf("validate: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	code, out, errs := babel(t, "", "inspect", f)
	if code != 0 {
		t.Fatalf("inspect: exit %d\nstderr %s", code, errs)
	}
	var ins struct {
		Nodes []struct {
			Name         string   `json:"name"`
			Kind         string   `json:"kind"`
			After        []string `json:"after"`
			Barrier      string   `json:"barrier"`
			AllowPrivate []string `json:"allow_private"`
			Secrets      []string `json:"secrets"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &ins); err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	wantKinds := map[string]string{
		"start": "builtin", "via_http": "http", "via_openapi": "openapi", "via_mcp": "mcp", "via_a2a": "a2a",
		"via_js": "wasm", "via_python": "process", "join": "builtin", "answer": "llm",
	}
	if len(ins.Nodes) != len(wantKinds) {
		t.Fatalf("inspect shows %d nodes, want %d:\n%s", len(ins.Nodes), len(wantKinds), out)
	}
	for _, n := range ins.Nodes {
		if want, ok := wantKinds[n.Name]; !ok || n.Kind != want {
			t.Errorf("inspect: node %s has kind %q, want %q", n.Name, n.Kind, want)
		}
		if want := privates[n.Name]; want != "" && (len(n.AllowPrivate) != 1 || n.AllowPrivate[0] != want) {
			t.Errorf("inspect: node %s allow_private %v, want [%s]", n.Name, n.AllowPrivate, want)
		}
		if n.Name == "join" && (n.Barrier != "all" || len(n.After) != 6) {
			t.Errorf("inspect: join barrier %q after %v, want all after the six branches", n.Barrier, n.After)
		}
		if n.Name == "answer" && !slices.Equal(n.Secrets, []string{"OPENAI_API_KEY"}) {
			t.Errorf("inspect: answer secrets %v", n.Secrets)
		}
	}
	if strings.Contains(out, mixedAPIKey) {
		t.Error("inspect printed the API key")
	}
	if got, want := p.hits.snapshot(), withHits(pinHits, map[string]int{"openapi GET /openapi.yaml": 2}); !maps.Equal(got, want) {
		t.Errorf("after validate and inspect the peers saw %v, want %v", got, want)
	}

	before := p.hits.snapshot()
	start := time.Now()
	code, out, errs = babel(t, "", "run", f, "--json", "--input", `{"q": "`+mixedTicket+`"}`)
	elapsed := time.Since(start)
	if code != 0 {
		t.Fatalf("run: exit %d (after %v)\nstdout %s\nstderr %s", code, elapsed, out, errs)
	}
	var res struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Output any    `json:"output"`
		Error  string `json:"error"`
		Steps  int    `json:"steps"`
		Trace  []struct {
			Node   string `json:"node"`
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"trace"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if res.Status != "succeeded" || res.RunID == "" {
		t.Fatalf("run: status %q error %q\n%s", res.Status, res.Error, out)
	}
	seen := map[string]bool{}
	for _, tr := range res.Trace {
		if tr.Status != "succeeded" {
			t.Errorf("trace: %s %s %s", tr.Node, tr.Status, tr.Error)
		}
		seen[tr.Node] = true
	}
	for n := range wantKinds {
		if !seen[n] {
			t.Errorf("trace has no entry for node %s:\n%s", n, out)
		}
	}

	// Each peer saw exactly what it should; the tool ran once, and only
	// through the model's call.
	p.mu.Lock()
	failures, auth, tools, prompt := slices.Clone(p.failures), slices.Clone(p.authSeen), slices.Clone(p.toolsSeen), p.promptSeen
	p.mu.Unlock()
	for _, f := range failures {
		t.Errorf("peer: %s", f)
	}
	wantRun := map[string]int{
		"http POST /classify":                      1,
		"openapi GET /openapi.yaml":                1, // compiling the graph for the run
		"openapi GET /v1/lookup":                   1,
		"mcp initialize":                           1,
		"mcp tools/list":                           1, // the pin is checked on the session that calls
		"mcp tools/call":                           1,
		"mcp search ran":                           1,
		"mcp session end":                          1, // the session is closed when the run ends
		"a2a GET " + a2asrv.WellKnownAgentCardPath: 1,
		"a2a POST /rpc":                            1,
		"a2a execute":                              1,
		"model POST /v1/chat/completions":          2, // the tool call, then the answer
		"stamp GET /stamp":                         1, // the tool, run once, only by the model's call
	}
	got := diffHits(p.hits.snapshot(), before)
	// The MCP handshake's own chatter is the SDK's business.
	delete(got, "mcp server/discover")
	delete(got, "mcp notifications/initialized")
	if !maps.Equal(got, wantRun) {
		t.Errorf("during the run the peers saw\n  %v\nwant\n  %v", got, wantRun)
	}

	// The key went to the model, and nowhere else.
	for i, a := range auth {
		if a != "Bearer "+mixedAPIKey {
			t.Errorf("model request %d: Authorization %q", i, a)
		}
	}
	for i, ts := range tools {
		if !slices.Equal(ts, []string{"stamp"}) {
			t.Errorf("model request %d offered tools %v, want [stamp]", i, ts)
		}
	}
	if strings.Contains(out, mixedAPIKey) || strings.Contains(errs, mixedAPIKey) {
		t.Errorf("the API key is in the run's output:\nstdout %s\nstderr %s", out, errs)
	}

	// Every peer's marker reached the join, the model's prompt and the
	// run's output.
	final, ok := res.Output.(string)
	if !ok {
		t.Fatalf("output %v (%T), want the model's text", res.Output, res.Output)
	}
	markers := map[string]string{
		"http": httpMarker(mixedTicket), "openapi": openapiMarker(mixedTicket), "mcp": mcpMarker(mixedTicket),
		"a2a": a2aMarker(mixedTicket), "js": jsMarker(mixedTicket), "python": pyMarker(mixedTicket),
	}
	for who, m := range markers {
		if !strings.Contains(prompt, m) {
			t.Errorf("the model's prompt lacks the %s marker %s: %s", who, m, prompt)
		}
		if !strings.Contains(final, m) {
			t.Errorf("the output lacks the %s marker %s: %s", who, m, final)
		}
	}
	if _, fromTool, ok := strings.Cut(final, "tool=["); !ok || !strings.Contains(fromTool, stampMarker(mixedTicket)) {
		t.Errorf("the tool's result (%s) did not reach the model: %s", stampMarker(mixedTicket), final)
	}

	// The audit log shows each node and the one tool call made through the
	// kernel (a tool call is a node call), and holds no key either.
	code, rep, errs := babel(t, "", "runs", "replay", res.RunID)
	if code != 0 {
		t.Fatalf("runs replay: exit %d %s", code, errs)
	}
	if strings.Contains(rep, mixedAPIKey) {
		t.Error("the API key is in the audit log")
	}
	// A call is recorded as an intent and an outcome, or (a call with no
	// consequential effect) as one record: either way one success each.
	succeeded := map[string]int{} // "node NAME" or "tool NAME" -> succeeded calls
	keyUses := 0
	for _, line := range strings.Split(strings.TrimSpace(rep), "\n") {
		var r struct {
			Kind, Node, Status, Secret string
			Args                       json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("replay line %q: %v", line, err)
		}
		family, step, _ := strings.Cut(r.Kind, ".")
		if (step == "outcome" || step == "call") && r.Status == "succeeded" {
			succeeded[family+" "+r.Node]++
		}
		if family == "tool" && len(r.Args) > 0 && string(r.Args) != `{"ref":"`+mixedTicket+`"}` {
			t.Errorf("audit: the tool was called with %s", r.Args)
		}
		if r.Kind == "secret.used" && r.Node == "answer" && r.Secret == "OPENAI_API_KEY" {
			keyUses++
		}
	}
	wantAudit := map[string]int{"tool stamp": 1}
	for n := range wantKinds {
		wantAudit["node "+n] = 1
	}
	if !maps.Equal(succeeded, wantAudit) || keyUses != 1 {
		t.Errorf("audit: succeeded calls %v, want %v; key issued %d times, want 1\n%s", succeeded, wantAudit, keyUses, rep)
	}
	if res.Steps != len(wantKinds)+1 {
		t.Errorf("steps %d, want %d (each node and the tool call)", res.Steps, len(wantKinds)+1)
	}
	t.Logf("babel run took %v", elapsed)
}

func withHits(base, more map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] += v
	}
	return out
}

func diffHits(now, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func TestDoctorListsEveryAdapterFamily(t *testing.T) {
	code, out, errs := babel(t, "", "doctor")
	if code != 0 {
		t.Fatalf("doctor: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	lines := map[string]string{} // "family name" -> line
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && (f[0] == "ok" || f[0] == "no") {
			lines[f[1]+" "+f[2]] = l
		}
	}
	for _, want := range []string{
		"adapter http", "adapter openapi", "adapter mcp", "adapter mcp+stdio", "adapter a2a", "adapter llm",
		"adapter code", "adapter process", "sandbox wasm", "sandbox javascript", "sandbox os", "sandbox python",
	} {
		if _, ok := lines[want]; !ok {
			t.Errorf("doctor has no %q line:\n%s", want, out)
		}
	}
	// bubblewrap and python3 are installed here and in CI: code runs in
	// every language.
	for _, want := range []string{"adapter code", "sandbox os", "sandbox python", "sandbox javascript"} {
		if l := lines[want]; !strings.HasPrefix(strings.TrimSpace(l), "ok") {
			t.Errorf("doctor: %q is not usable: %s", want, l)
		}
	}
	if l := lines["adapter code"]; !strings.Contains(l, "js") || !strings.Contains(l, "python") {
		t.Errorf("doctor: the code line does not name js and python: %s", l)
	}
}
