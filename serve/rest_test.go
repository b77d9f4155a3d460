package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/serve/rest"
	"github.com/babelagent/babel/serve/service"
)

func TestRunWaitsAndReturnsTheRunShape(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "  hello  ", "wait": true})
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	r := decodeRun(t, b)
	if r.Status != "succeeded" || string(r.Output) != `"HELLO"` || r.Graph != "pipeline" || r.Principal != "token:alice" {
		t.Errorf("run: %s", b)
	}
	if len(r.Trace) != 3 || r.Trace[0].Node != "trim" || r.Trace[2].Node != "echo" || r.Labels == nil {
		t.Errorf("trace or labels: %s", b)
	}
	// The same run, read back.
	code, _, b2 := ts.do("GET", "/v1/runs/"+r.RunID, aliceToken, nil)
	if code != http.StatusOK || !bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(b2)) {
		t.Errorf("GET: %d\n%s\nwant\n%s", code, b2, b)
	}
}

func TestAsyncRunAnswers202ThenFinishes(t *testing.T) {
	ts := startServer(t, serverSetup{}, "nap")
	code, h, b := ts.do("POST", "/v1/graphs/nap/runs", aliceToken, map[string]any{"input": "zzz"})
	if code != http.StatusAccepted {
		t.Fatalf("%d %s", code, b)
	}
	var started struct{ RunID, Status string }
	_ = json.Unmarshal(b, &struct {
		RunID  *string `json:"run_id"`
		Status *string `json:"status"`
	}{&started.RunID, &started.Status})
	if started.RunID == "" || started.Status != "running" || h.Get("Location") != "/v1/runs/"+started.RunID {
		t.Fatalf("202 body %s, Location %q", b, h.Get("Location"))
	}
	code, _, b = ts.do("GET", "/v1/runs/"+started.RunID, aliceToken, nil)
	if r := decodeRun(t, b); code != http.StatusOK || r.Status != "running" {
		t.Errorf("while running: %d %s", code, b)
	}
	if r := ts.waitRun(started.RunID, aliceToken); r.Status != "succeeded" || string(r.Output) != `"ZZZ"` {
		t.Errorf("finished: %+v", r)
	}
	// It is in the principal's list.
	_, _, b = ts.do("GET", "/v1/runs?limit=5", aliceToken, nil)
	if !strings.Contains(string(b), started.RunID) {
		t.Errorf("list lacks the run: %s", b)
	}
}

func TestCallerSeesOnlyItsOwnRuns(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline", "slow")
	_, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "mine", "wait": true})
	done := decodeRun(t, b)
	_, _, b = ts.do("POST", "/v1/graphs/slow/runs", aliceToken, map[string]any{"input": "mine"})
	live := runIDs(b)[0]
	for _, id := range []string{done.RunID, live} {
		for _, rt := range [][2]string{{"GET", "/v1/runs/" + id}, {"GET", "/v1/runs/" + id + "/events"}, {"POST", "/v1/runs/" + id + "/cancel"}} {
			code, _, b := ts.do(rt[0], rt[1], bobToken, nil)
			if code != http.StatusNotFound {
				t.Errorf("bob %s %s: %d %s, want 404", rt[0], rt[1], code, b)
			}
			// The same answer as for a run that does not exist.
			code2, _, _ := ts.do(rt[0], strings.Replace(rt[1], id, "0123456789abcdef01234567", 1), bobToken, nil)
			if code2 != code {
				t.Errorf("another principal's run (%d) and no run (%d) answer differently", code, code2)
			}
		}
	}
	_, _, b = ts.do("GET", "/v1/runs", bobToken, nil)
	if strings.Contains(string(b), done.RunID) || strings.Contains(string(b), live) {
		t.Errorf("bob's list shows alice's runs: %s", b)
	}
	if code, _, _ := ts.do("GET", "/v1/runs/"+live, aliceToken, nil); code != http.StatusOK {
		t.Errorf("alice reading her run: %d", code)
	}
	// bob's attempt did not cancel it.
	if r := decodeRun(t, must(ts.do("GET", "/v1/runs/"+live, aliceToken, nil))); r.Status != "running" {
		t.Errorf("alice's run is %s after bob's cancel", r.Status)
	}
	ts.do("POST", "/v1/runs/"+live+"/cancel", aliceToken, nil)
}

func must(_ int, _ http.Header, b []byte) []byte { return b }

// probe is an agent that blocks until cancelled, and says when it stopped.
type probe struct {
	started, stopped chan struct{}
}

func (p *probe) Card() agent.Card { return agent.Card{Name: "probe", Kind: "fn"} }
func (p *probe) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	close(p.started)
	<-ctx.Done()
	close(p.stopped)
	return agent.Message{}, ctx.Err()
}

func probeGraph(t *testing.T, name string, p *probe) *graph.Graph {
	t.Helper()
	g, err := graph.Compile(&graph.Spec{Name: name, Nodes: []graph.NodeSpec{{Name: "probe", Timeout: graph.Duration(time.Hour)}}},
		nil, &graph.CompileOptions{Agents: map[string]agent.Agent{"probe": p}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCancelStopsInFlightWork(t *testing.T) {
	p := &probe{started: make(chan struct{}), stopped: make(chan struct{})}
	ts := startServer(t, serverSetup{extra: []*graph.Graph{probeGraph(t, "blocker", p)}})
	code, _, b := ts.do("POST", "/v1/graphs/blocker/runs", aliceToken, map[string]any{"input": "x"})
	if code != http.StatusAccepted {
		t.Fatalf("%d %s", code, b)
	}
	id := runIDs(b)[0]
	<-p.started
	start := time.Now()
	code, _, b = ts.do("POST", "/v1/runs/"+id+"/cancel", aliceToken, nil)
	if code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, b)
	}
	select {
	case <-p.stopped:
	case <-time.After(time.Second):
		t.Fatal("the node's work did not stop within a second of cancel")
	}
	if r := decodeRun(t, b); r.Status != "cancelled" || r.ErrorCode != "cancelled" {
		t.Errorf("after cancel: %s", b)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancel took %v", took)
	}
	// A finished run cannot be cancelled again.
	code, _, b = ts.do("POST", "/v1/runs/"+id+"/cancel", aliceToken, nil)
	if e := decodeError(t, b); code != http.StatusConflict || e.Error.Code != "not_cancellable" {
		t.Errorf("second cancel: %d %s", code, b)
	}
}

func TestWaitingCallerThatLeavesCancelsItsRun(t *testing.T) {
	p := &probe{started: make(chan struct{}), stopped: make(chan struct{})}
	ts := startServer(t, serverSetup{extra: []*graph.Graph{probeGraph(t, "blocker", p)}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.base+"/v1/graphs/blocker/runs", strings.NewReader(`{"input":"x","wait":true}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	go func() { <-p.started; cancel() }()
	if _, err := ts.client.Do(req); err == nil {
		t.Fatal("the request should have been cancelled")
	}
	select {
	case <-p.stopped:
	case <-time.After(2 * time.Second):
		t.Fatal("the run went on after its only caller left")
	}
}

type sseEvent struct {
	ID, Type string
	Data     map[string]any
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Type != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.Data); err != nil {
				t.Errorf("event data: %v", err)
			}
		}
	}
	return out
}

func types(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+":"+strOf(e.Data["node"]))
	}
	return out
}

func strOf(v any) string { s, _ := v.(string); return s }

func TestEventStreamReplaysThenFollowsLive(t *testing.T) {
	ts := startServer(t, serverSetup{}, "nap")
	want := []string{"run.started:", "node.started:nap", "node.finished:nap", "node.started:upper", "node.finished:upper", "run.finished:"}

	_, _, b := ts.do("POST", "/v1/graphs/nap/runs", aliceToken, map[string]any{"input": "x"})
	id := runIDs(b)[0]
	// A subscriber while the run sleeps: history so far, then live, ending after run.finished.
	req, _ := http.NewRequest("GET", ts.base+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	live := readSSE(t, resp.Body)
	resp.Body.Close()
	if !slices.Equal(types(live), want) {
		t.Errorf("live stream: %v, want %v", types(live), want)
	}
	if last := live[len(live)-1]; last.Data["status"] != "succeeded" {
		t.Errorf("run.finished: %v", last.Data)
	}
	// A late subscriber gets the same history.
	_, _, b = ts.do("GET", "/v1/runs/"+id+"/events", aliceToken, nil)
	late := readSSE(t, bytes.NewReader(b))
	if !slices.Equal(types(late), want) {
		t.Errorf("late stream: %v", types(late))
	}
	// Last-Event-ID resumes after the event it names.
	_, _, b = ts.do("GET", "/v1/runs/"+id+"/events", aliceToken, nil, "Last-Event-ID", "2")
	if got := types(readSSE(t, bytes.NewReader(b))); !slices.Equal(got, want[3:]) {
		t.Errorf("resumed: %v, want %v", got, want[3:])
	}
	if code, _, _ := ts.do("GET", "/v1/runs/"+id+"/events", aliceToken, nil, "Last-Event-ID", "x"); code != http.StatusBadRequest {
		t.Errorf("a bad Last-Event-ID: %d", code)
	}
}

func TestOutputIsBoundedInSizeAndDepth(t *testing.T) {
	ts := startServer(t, serverSetup{cfg: Config{MaxOutputBytes: 2000, MaxOutputDepth: 16}}, "echo")
	check := func(name string, input any, code string) {
		t.Helper()
		_, _, b := ts.do("POST", "/v1/graphs/echo/runs", aliceToken, map[string]any{"input": input, "wait": true})
		r := decodeRun(t, b)
		if r.Status != "succeeded" || r.ErrorCode != code {
			t.Errorf("%s: status %s code %q, want %q", name, r.Status, r.ErrorCode, code)
		}
		var marker struct {
			Truncated bool   `json:"truncated"`
			Code      string `json:"code"`
		}
		if code != "" && (json.Unmarshal(r.Output, &marker) != nil || !marker.Truncated || marker.Code != code) {
			t.Errorf("%s: output %s, want a truncation marker", name, r.Output)
		}
		if len(b) > 4000 {
			t.Errorf("%s: the response is %d bytes", name, len(b))
		}
	}
	check("small", "fine", "")
	check("wide", strings.Repeat("w", 5000), "output_too_large")
	var deep any = "bottom"
	for range 40 {
		deep = []any{deep}
	}
	check("deep", deep, "output_too_deep")
	wide := map[string]any{}
	for i := range 300 {
		wide[strings.Repeat("k", 3)+string(rune('a'+i%26))+strings.Repeat("x", i%7)+string(rune('A'+i/26))] = i
	}
	check("wide object", wide, "output_too_large")
}

func TestInputIsCheckedAgainstTheGraphSchema(t *testing.T) {
	ts := startServer(t, serverSetup{}, "typed")
	code, _, b := ts.do("POST", "/v1/graphs/typed/runs", aliceToken, map[string]any{"input": map[string]any{"name": "ada"}, "wait": true})
	if r := decodeRun(t, b); code != http.StatusOK || string(r.Output) != `"ADA"` {
		t.Errorf("valid input: %d %s", code, b)
	}
	for _, in := range []any{"text", map[string]any{}, map[string]any{"name": 7}, map[string]any{"name": "x", "extra": 1}, map[string]any{"name": strings.Repeat("n", 41)}} {
		code, _, b := ts.do("POST", "/v1/graphs/typed/runs", aliceToken, map[string]any{"input": in, "wait": true})
		if e := decodeError(t, b); code != http.StatusBadRequest || e.Error.Code != "invalid_input" || !strings.Contains(e.Error.Message, "schema") {
			t.Errorf("input %v: %d %s", in, code, b)
		}
	}
}

func TestGraphsAreListedWithTheirSchemas(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline", "typed", "writer")
	code, _, b := ts.do("GET", "/v1/graphs", aliceToken, nil)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	var got struct {
		Graphs []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
			Declared    bool            `json:"input_schema_declared"`
			Effects     []string        `json:"effects"`
		} `json:"graphs"`
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got.Graphs) != 3 {
		t.Fatalf("%v %s", err, b)
	}
	byName := map[string]int{}
	for i, g := range got.Graphs {
		byName[g.Name] = i
	}
	if g := got.Graphs[byName["pipeline"]]; string(g.InputSchema) != `{"type":"string"}` || g.Declared {
		t.Errorf("pipeline: %s %v", g.InputSchema, g.Declared)
	}
	if g := got.Graphs[byName["typed"]]; !g.Declared || !strings.Contains(string(g.InputSchema), `"required"`) {
		t.Errorf("typed: %s", g.InputSchema)
	}
	if g := got.Graphs[byName["writer"]]; !slices.Contains(g.Effects, "write") {
		t.Errorf("writer effects: %v", g.Effects)
	}
	code, _, b = ts.do("POST", "/v1/graphs/nope/runs", aliceToken, map[string]any{"input": "x"})
	if e := decodeError(t, b); code != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Errorf("unknown graph: %d %s", code, b)
	}
}

func TestApprovalRoutesAnswerNotImplementedForNow(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	for _, rt := range [][2]string{{"GET", "/v1/approvals"}, {"POST", "/v1/approvals/abc"}} {
		code, _, b := ts.do(rt[0], rt[1], aliceToken, nil)
		if e := decodeError(t, b); code != http.StatusNotImplemented || e.Error.Code != "not_implemented" {
			t.Errorf("%v: %d %s", rt, code, b)
		}
	}
	// The seam: a handler given in Options serves them, with the principal.
	seen := ""
	ts2 := startServer(t, serverSetup{opts: Options{Approvals: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Method + " " + r.URL.Path
		w.WriteHeader(http.StatusNoContent)
	})}}, "pipeline")
	if code, _, _ := ts2.do("POST", "/v1/approvals/abc", aliceToken, `{}`); code != http.StatusNoContent || seen != "POST /v1/approvals/abc" {
		t.Errorf("approvals seam: %d %q", code, seen)
	}
}

func TestMetricsAreServedBehindAuth(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "x", "wait": true})
	ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "x", "wait": true}, "Host", "evil.example")
	code, _, b := ts.do("GET", "/metrics", aliceToken, nil)
	if code != http.StatusOK {
		t.Fatalf("%d", code)
	}
	for _, want := range []string{`babel_runs_finished_total{graph="pipeline",status="succeeded"} 1`,
		`babel_http_refused_total{reason="host"} 1`, `babel_runs_active 0`,
		`babel_http_requests_total{code="200",route="POST /v1/graphs/{name}/runs"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestOpenAPIDocumentDescribesTheServer checks the document is valid
// OpenAPI 3.1, covers every route the server has, and that real responses
// match it.
func TestOpenAPIDocumentDescribesTheServer(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline", "leaky")
	code, _, b := ts.do("GET", "/v1/openapi.json", aliceToken, nil)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	if !bytes.Equal(rest.OpenAPI(), b) {
		t.Error("the server does not serve its embedded document as is")
	}
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("invalid OpenAPI: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("version %s", doc.OpenAPI)
	}
	// Every route the code registers is documented.
	src, err := readFiles("rest/rest.go", "server.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`handle\("(?:(GET|POST) )?(/[^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		path := m[2]
		if path == "/v1/" {
			continue
		}
		if doc.Paths.Find(path) == nil {
			t.Errorf("route %s %s is not in the document", m[1], path)
		}
	}
	for _, p := range []string{"/a2a", "/a2a/v0.3", "/.well-known/agent-card.json", "/mcp"} {
		if doc.Paths.Find(p) == nil {
			t.Errorf("%s is not in the document", p)
		}
	}
	// Real responses validate against it.
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, _, b = ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "x"})
	id := runIDs(b)[0]
	ts.waitRun(id, aliceToken)
	for _, c := range []struct {
		method, path, body string
	}{
		{"GET", "/v1/graphs", ""},
		{"POST", "/v1/graphs/pipeline/runs", `{"input":"x","wait":true}`},
		{"POST", "/v1/graphs/leaky/runs", `{"input":"x","wait":true}`},
		{"POST", "/v1/graphs/pipeline/runs", `{"input":"x"}`},
		{"POST", "/v1/graphs/pipeline/runs", `{not json`},
		{"GET", "/v1/runs/" + id, ""},
		{"GET", "/v1/runs/nope", ""},
		{"GET", "/v1/runs", ""},
		{"POST", "/v1/runs/" + id + "/cancel", ""},
		{"GET", "/v1/approvals", ""},
		{"GET", "/healthz", ""},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, _ := http.NewRequest(c.method, ts.base+c.path, body)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u, _ := url.Parse("http://127.0.0.1:7077" + c.path)
		vreq, _ := http.NewRequest(c.method, u.String(), nil)
		route, params, err := router.FindRoute(vreq)
		if err != nil {
			t.Errorf("%s %s: no route in the document: %v", c.method, c.path, err)
			continue
		}
		in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Body: io.NopCloser(bytes.NewReader(rb)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s %s -> %d does not match the document: %v\n%s", c.method, c.path, resp.StatusCode, err, rb)
		}
	}
}

// TestCallerSeesOnlyTheGraphsItMayRun: a graph a principal may not run is
// absent from every door's listing, and running it is forbidden.
func TestCallerSeesOnlyTheGraphsItMayRun(t *testing.T) {
	onlyPipelineForBob := service.AuthorizerFunc(func(_ context.Context, p, action, graph string) error {
		if p == "token:bob" && graph != "pipeline" {
			return errors.New("bob may only run pipeline")
		}
		return nil
	})
	ts := startServer(t, serverSetup{opts: Options{Authorizer: onlyPipelineForBob}}, "pipeline", "typed")
	_, _, b := ts.do("GET", "/v1/graphs", bobToken, nil)
	if strings.Contains(string(b), `"typed"`) || !strings.Contains(string(b), `"pipeline"`) {
		t.Errorf("bob's graphs: %s", b)
	}
	code, _, b := ts.do("POST", "/v1/graphs/typed/runs", bobToken, map[string]any{"input": map[string]any{"name": "x"}, "wait": true})
	if e := decodeError(t, b); code != http.StatusForbidden || e.Error.Code != "forbidden" {
		t.Errorf("bob running typed: %d %s", code, b)
	}
	s, err := mcpSession(t, ts, bobToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "pipeline" {
		t.Errorf("bob's MCP tools: %v %s", err, jsonOf(res))
	}
	_, card := a2aClient(t, ts, bobToken)
	if len(card.Skills) != 1 || card.Skills[0].ID != "pipeline" {
		t.Errorf("bob's A2A skills: %+v", card.Skills)
	}
	// alice sees both.
	_, card = a2aClient(t, ts, aliceToken)
	if len(card.Skills) != 2 {
		t.Errorf("alice's A2A skills: %+v", card.Skills)
	}
}
