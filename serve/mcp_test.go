package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/babelagent/babel/graph"
)

// bearer adds a token (and optionally a Host) to every request.
type bearer struct {
	token, host string
	base        http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.host != "" {
		r.Host = b.host
	}
	return b.base.RoundTrip(r)
}

func mcpSession(t *testing.T, ts *testServer, token string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "babel-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: tr}}}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestMCPToolsAreTheGraphs(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline", "typed", "writer")
	s, err := mcpSession(t, ts, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	if len(tools) != 3 {
		t.Fatalf("tools: %v", tools)
	}
	schema := func(name string) map[string]any {
		b, _ := json.Marshal(tools[name].InputSchema)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	// A text graph takes {"input": string}; an object graph takes its own schema.
	if sc := schema("pipeline"); sc["type"] != "object" || !strings.Contains(jsonOf(sc), `"input":{"type":"string"}`) {
		t.Errorf("pipeline schema: %s", jsonOf(sc))
	}
	if sc := schema("typed"); !strings.Contains(jsonOf(sc), `"name"`) || strings.Contains(jsonOf(sc), `"input"`) {
		t.Errorf("typed schema: %s", jsonOf(sc))
	}
	// Annotations say honestly what each may do.
	p, w := tools["pipeline"].Annotations, tools["writer"].Annotations
	if !p.ReadOnlyHint || p.DestructiveHint == nil || *p.DestructiveHint || p.OpenWorldHint == nil || *p.OpenWorldHint {
		t.Errorf("pipeline annotations: %+v", p)
	}
	if w.ReadOnlyHint || w.DestructiveHint == nil || !*w.DestructiveHint {
		t.Errorf("writer annotations: %+v", w)
	}

	// A call is a run: structured content is the run shape, plus a text summary.
	call, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "pipeline", Arguments: map[string]any{"input": "  mcp  "}})
	if err != nil {
		t.Fatal(err)
	}
	if call.IsError {
		t.Fatalf("tool error: %+v", call.Content)
	}
	r := decodeRun(t, []byte(jsonOf(call.StructuredContent)))
	if r.Status != "succeeded" || string(r.Output) != `"MCP"` || r.Principal != "token:alice" {
		t.Errorf("structured content: %s", jsonOf(call.StructuredContent))
	}
	if txt := call.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, "succeeded") || !strings.Contains(txt, "MCP") {
		t.Errorf("summary: %q", txt)
	}
	// The run is the principal's, like any other.
	if code, _, _ := ts.do("GET", "/v1/runs/"+r.RunID, aliceToken, nil); code != http.StatusOK {
		t.Errorf("alice reading the MCP run over REST: %d", code)
	}
	if code, _, _ := ts.do("GET", "/v1/runs/"+r.RunID, bobToken, nil); code != http.StatusNotFound {
		t.Errorf("bob reading alice's MCP run: %d", code)
	}
	// Object graphs take their arguments as input.
	call, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "typed", Arguments: map[string]any{"name": "ada"}})
	if err != nil || call.IsError || decodeRun(t, []byte(jsonOf(call.StructuredContent))).Status != "succeeded" {
		t.Errorf("typed call: %v %+v", err, call)
	}
	// Bad arguments are a tool error that says what is wrong.
	for _, args := range []any{map[string]any{}, map[string]any{"input": "x", "more": 1}} {
		call, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "pipeline", Arguments: args})
		if err != nil || !call.IsError || !strings.Contains(call.Content[0].(*mcp.TextContent).Text, "input") {
			t.Errorf("args %v: %v %+v", args, err, call)
		}
	}
	call, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "typed", Arguments: map[string]any{"name": 3}})
	if err != nil || !call.IsError || !strings.Contains(call.Content[0].(*mcp.TextContent).Text, "invalid_input") {
		t.Errorf("schema violation: %v %+v", err, call)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestMCPFailedRunIsAToolErrorWithoutInternals(t *testing.T) {
	ts := startServer(t, serverSetup{}, "leaky")
	s, err := mcpSession(t, ts, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	call, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "leaky", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	all := jsonOf(call)
	if !call.IsError || strings.Contains(all, "SENSITIVE_INTERNAL_PATH") || strings.Contains(all, "/etc/secret") {
		t.Errorf("result: %s", all)
	}
	if !strings.Contains(all, "node_failed") || !strings.Contains(all, "correlation") {
		t.Errorf("want a code and a correlation id: %s", all)
	}
}

func TestMCPOverHTTPNeedsATokenAndALoopbackHost(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	for _, tok := range []string{"", "not-a-valid-token-at-all"} {
		if _, err := mcpSession(t, ts, tok); err == nil {
			t.Errorf("token %q: connected", tok)
		}
	}
	// A DNS-rebound page (foreign Host) cannot reach it, token or not.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	_, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: aliceToken, host: "rebound.example", base: http.DefaultTransport}}}, nil)
	if err == nil {
		t.Error("connected with a foreign Host")
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

func TestMCPSessionIsBoundToItsPrincipal(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	s, err := mcpSession(t, ts, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	// bob presents alice's session id.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"pipeline","arguments":{"input":"x"}}}`
	code, _, b := ts.do("POST", "/mcp", bobToken, body, "Mcp-Session-Id", s.ID(), "Accept", "application/json, text/event-stream",
		"Mcp-Protocol-Version", "2025-06-18")
	if code != http.StatusForbidden || strings.Contains(string(b), "succeeded") {
		t.Errorf("bob on alice's session: %d %s", code, b)
	}
}

func TestMCPCancelledCallCancelsItsRun(t *testing.T) {
	p := &probe{started: make(chan struct{}), stopped: make(chan struct{})}
	ts := startServer(t, serverSetup{extra: []*graph.Graph{probeGraph(t, "blocker", p)}})
	s, err := mcpSession(t, ts, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-p.started; cancel() }()
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "blocker", Arguments: map[string]any{"input": "x"}}); err == nil {
		t.Fatal("the call should have been cancelled")
	}
	select {
	case <-p.stopped:
	case <-time.After(3 * time.Second):
		t.Fatal("the run went on after the client cancelled its call")
	}
}

func TestMCPOverStdio(t *testing.T) {
	graphs := loadGraphs(t, "pipeline", "leaky")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, graphs, inR, outW, &StdioOptions{Principal: "local:tester"}) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "pipeline", Arguments: map[string]any{"input": " stdio "}})
	if err != nil || call.IsError {
		t.Fatalf("%v %+v", err, call)
	}
	if r := decodeRun(t, []byte(jsonOf(call.StructuredContent))); string(r.Output) != `"STDIO"` || r.Principal != "local:tester" {
		t.Errorf("run: %s", jsonOf(call.StructuredContent))
	}
	s.Close()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the stdio server did not stop")
	}
}
