package telemetry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

// canary stands for any content: a prompt, an argument, a secret.
const canary = "CANARY-7f3a9c-do-not-export"

// traced returns a runner whose kernel reports to a Tracer built from opts
// with an in-memory exporter, and a function that flushes and returns the
// spans ended so far.
func traced(t *testing.T, opts telemetry.Options) (*run.Runner, func() tracetest.SpanStubs) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	opts.Exporter = exp
	tr, err := telemetry.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Tracer: tr})})
	if err != nil {
		t.Fatal(err)
	}
	return r, func() tracetest.SpanStubs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
}

func build(t *testing.T, b *graph.Builder) *graph.Graph {
	t.Helper()
	g, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func str(s tracetest.SpanStub, key string) string {
	v, _ := attr(s, key)
	return v.AsString()
}

func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func callFor(t *testing.T, spans tracetest.SpanStubs, node string) tracetest.SpanStub {
	t.Helper()
	for _, s := range named(spans, telemetry.SpanCall) {
		if str(s, telemetry.AttrNode) == node {
			return s
		}
	}
	t.Fatalf("no call span for node %s", node)
	return tracetest.SpanStub{}
}

func TestRunAndCallSpansCarryIdentityAndNest(t *testing.T) {
	r, spans := traced(t, telemetry.Options{})
	g := build(t, graph.New("chain").Add("trim", builtin.Trim()).Add("upper", builtin.Upper()))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("  hi  "), Principal: "alice", RunID: "run-1"})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	got := spans()
	runs := named(got, telemetry.SpanRun)
	if len(runs) != 1 || len(named(got, telemetry.SpanCall)) != 2 {
		t.Fatalf("got %d run spans and %d call spans, want 1 and 2", len(runs), len(named(got, telemetry.SpanCall)))
	}
	rs := runs[0]
	for key, want := range map[string]string{
		telemetry.AttrRunID: "run-1", telemetry.AttrRootRunID: "run-1", telemetry.AttrGraph: "chain",
		telemetry.AttrPrincipal: "alice", telemetry.AttrRunStatus: "succeeded",
	} {
		if v := str(rs, key); v != want {
			t.Errorf("run span %s = %q, want %q", key, v, want)
		}
	}
	if _, ok := attr(rs, telemetry.AttrParentRunID); ok {
		t.Error("a top-level run span carries a parent run id")
	}
	if rs.Status.Code == codes.Error {
		t.Error("a succeeded run's span is marked as an error")
	}
	for _, node := range []string{"trim", "upper"} {
		cs := callFor(t, got, node)
		if cs.Parent.SpanID() != rs.SpanContext.SpanID() || cs.SpanContext.TraceID() != rs.SpanContext.TraceID() {
			t.Errorf("call span %s is not a child of the run span", node)
		}
		for key, want := range map[string]string{
			telemetry.AttrRunID: "run-1", telemetry.AttrRootRunID: "run-1", telemetry.AttrPrincipal: "alice",
			telemetry.AttrGraph: "chain", telemetry.AttrAgent: "builtin:" + node, telemetry.AttrAdapter: "builtin",
			telemetry.AttrCallKind: "node", telemetry.AttrCallStatus: "ok",
		} {
			if v := str(cs, key); v != want {
				t.Errorf("call span %s: %s = %q, want %q", node, key, v, want)
			}
		}
		if v, _ := attr(cs, telemetry.AttrEffects); !slices.Equal(v.AsStringSlice(), []string{"none"}) {
			t.Errorf("call span %s: effects = %v", node, v.AsStringSlice())
		}
		if v, _ := attr(cs, telemetry.AttrAttempt); v.AsInt64() != 1 {
			t.Errorf("call span %s: attempt = %d", node, v.AsInt64())
		}
		if _, ok := attr(cs, telemetry.AttrToolParent); ok {
			t.Errorf("node call span %s names a tool parent", node)
		}
	}
}

func TestCallSpanCarriesDeclaredEffects(t *testing.T) {
	r, spans := traced(t, telemetry.Options{})
	reader := agent.MustFunc("reader", func(_ context.Context, in string) (string, error) { return in, nil },
		&agent.FuncOptions{Effects: []agent.Effect{agent.EffectRead}})
	g := build(t, graph.New("fx").Add("reader", reader, graph.Declare([]agent.Effect{agent.EffectRead}, nil, nil)))
	if res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")}); res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	cs := callFor(t, spans(), "reader")
	if v, _ := attr(cs, telemetry.AttrEffects); !slices.Equal(v.AsStringSlice(), []string{"read"}) {
		t.Fatalf("effects = %v, want [read]", v.AsStringSlice())
	}
	if a := str(cs, telemetry.AttrAdapter); a != "fn" {
		t.Fatalf("adapter = %q, want fn", a)
	}
}

func TestToolCallSpanIsChildOfTheCallThatMadeIt(t *testing.T) {
	r, spans := traced(t, telemetry.Options{})
	planner := agent.MustFunc("planner", func(ctx context.Context, in string) (string, error) {
		out, err := agent.ToolsFrom(ctx).Call(ctx, "shout", json.RawMessage(`"quiet"`))
		return out.Text(), err
	}, nil)
	g := build(t, graph.New("tools").Add("planner", planner, graph.Tools("shout")).Tool("shout", builtin.Upper()))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("go"), Principal: "bob"})
	if res.Status != run.StatusSucceeded || res.Output.Text() != "QUIET" {
		t.Fatalf("%s %q: %s", res.Status, res.Output.Text(), res.Error)
	}
	got := spans()
	ps, ts := callFor(t, got, "planner"), callFor(t, got, "shout")
	if ts.Parent.SpanID() != ps.SpanContext.SpanID() {
		t.Fatal("the tool's span is not a child of the planner's span")
	}
	if str(ts, telemetry.AttrToolParent) != "planner" || str(ts, telemetry.AttrCallKind) != "tool" {
		t.Fatalf("tool span: parent %q kind %q", str(ts, telemetry.AttrToolParent), str(ts, telemetry.AttrCallKind))
	}
	if str(ts, telemetry.AttrPrincipal) != "bob" || str(ts, telemetry.AttrRunID) != res.RunID {
		t.Fatal("the tool span lost the run's principal or id")
	}
	if str(ps, telemetry.AttrAdapter) != "fn" || str(ts, telemetry.AttrAdapter) != "builtin" {
		t.Fatalf("adapters: planner %q, tool %q", str(ps, telemetry.AttrAdapter), str(ts, telemetry.AttrAdapter))
	}
}

func TestChildRunSpanCarriesTheDelegationChain(t *testing.T) {
	r, spans := traced(t, telemetry.Options{})
	parent := &kernel.Run{ID: "parent-run", RootID: "root-run", Budget: kernel.NewBudget(100, 1000)}
	g := build(t, graph.New("child").Add("echo", builtin.Echo()))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x"), RunID: "child-run", Parent: parent})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	got := spans()
	for _, s := range append(named(got, telemetry.SpanRun), callFor(t, got, "echo")) {
		if str(s, telemetry.AttrRunID) != "child-run" || str(s, telemetry.AttrParentRunID) != "parent-run" ||
			str(s, telemetry.AttrRootRunID) != "root-run" {
			t.Errorf("%s: run %q parent %q root %q", s.Name, str(s, telemetry.AttrRunID),
				str(s, telemetry.AttrParentRunID), str(s, telemetry.AttrRootRunID))
		}
	}
}

// everything renders all a span exports as text: name, attributes, events,
// links, status and resource.
func everything(s tracetest.SpanStub) string {
	var b strings.Builder
	kv := func(attrs []attribute.KeyValue) {
		for _, a := range attrs {
			b.WriteString(string(a.Key) + "=" + a.Value.Emit() + "\n")
		}
	}
	b.WriteString(s.Name + "\n" + s.Status.Description + "\n")
	kv(s.Attributes)
	for _, e := range s.Events {
		b.WriteString(e.Name + "\n")
		kv(e.Attributes)
	}
	for _, l := range s.Links {
		kv(l.Attributes)
	}
	if s.Resource != nil {
		kv(s.Resource.Attributes())
	}
	return b.String()
}

func TestSpansHoldNoContentByDefault(t *testing.T) {
	r, spans := traced(t, telemetry.Options{})
	g := build(t, graph.New("leak").Add("first", builtin.Echo()).Add("boom", builtin.Fail("upstream said "+canary, false)))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("prompt: " + canary)})
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, canary) {
		t.Fatalf("the run should fail with the canary in its error: %s %q", res.Status, res.Error)
	}
	got := spans()
	if len(got) != 3 {
		t.Fatalf("got %d spans, want 3", len(got))
	}
	for _, s := range got {
		if text := everything(s); strings.Contains(text, canary) {
			t.Fatalf("span %s exports content:\n%s", s.Name, text)
		}
	}
	boom := callFor(t, got, "boom")
	if boom.Status.Code != codes.Error || str(boom, telemetry.AttrErrorType) != "peer" || str(boom, telemetry.AttrCallStatus) != "error" {
		t.Fatalf("failed call span: status %v %q, error.type %q", boom.Status.Code, boom.Status.Description, str(boom, telemetry.AttrErrorType))
	}
	if _, ok := attr(boom, telemetry.AttrInput); ok {
		t.Fatal("the call's input was recorded without IncludeContent")
	}
	if rs := named(got, telemetry.SpanRun)[0]; rs.Status.Code != codes.Error || str(rs, telemetry.AttrRunStatus) != "failed" {
		t.Fatalf("run span: %v %q", rs.Status.Code, str(rs, telemetry.AttrRunStatus))
	}
}

func TestTimedOutCallIsClassedTimeout(t *testing.T) {
	r, spans := traced(t, telemetry.Options{})
	g := build(t, graph.New("slow").Add("slow", builtin.Sleep(10*time.Second, false), graph.Timeout(20*time.Millisecond)))
	if res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")}); res.Status != run.StatusFailed {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if c := str(callFor(t, spans(), "slow"), telemetry.AttrErrorType); c != "timeout" {
		t.Fatalf("error.type = %q, want timeout", c)
	}
}

func TestIncludeContentStillRedactsErrorsAndInputs(t *testing.T) {
	redact := func(s string) string { return strings.ReplaceAll(s, canary, "[REDACTED]") }
	r, spans := traced(t, telemetry.Options{IncludeContent: true, Redact: redact})
	g := build(t, graph.New("leak").Add("first", builtin.Echo()).Add("boom", builtin.Fail("upstream said "+canary, false)))
	if res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("prompt: " + canary)}); res.Status != run.StatusFailed {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	got := spans()
	for _, s := range got {
		if text := everything(s); strings.Contains(text, canary) {
			t.Fatalf("span %s exports unredacted content:\n%s", s.Name, text)
		}
	}
	boom := callFor(t, got, "boom")
	if in := str(boom, telemetry.AttrInput); !strings.Contains(in, "prompt: [REDACTED]") {
		t.Fatalf("input = %q, want the redacted input", in)
	}
	if !strings.Contains(boom.Status.Description, "upstream said [REDACTED]") {
		t.Fatalf("status = %q, want the redacted error text", boom.Status.Description)
	}
	if len(boom.Events) != 1 || boom.Events[0].Name != "exception" {
		t.Fatalf("events = %+v, want one exception event", boom.Events)
	}
}

func TestIncludeContentNeverRecordsSensitiveInput(t *testing.T) {
	r, spans := traced(t, telemetry.Options{IncludeContent: true, Redact: func(s string) string { return s }})
	g := build(t, graph.New("private").Add("vault", builtin.Echo(), graph.Sensitive()).Add("next", builtin.Echo()))
	if res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text(canary)}); res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	got := spans()
	for _, node := range []string{"vault", "next"} {
		if text := everything(callFor(t, got, node)); strings.Contains(text, canary) {
			t.Fatalf("node %s's span records sensitive content:\n%s", node, text)
		}
	}
	if v, _ := attr(callFor(t, got, "next"), telemetry.AttrInputLabels); !slices.Contains(v.AsStringSlice(), "sensitive") {
		t.Fatalf("input labels = %v, want sensitive", v.AsStringSlice())
	}
}

func TestIncludeContentWithoutRedactIsRefused(t *testing.T) {
	if _, err := telemetry.New(&telemetry.Options{IncludeContent: true}); err == nil {
		t.Fatal("IncludeContent without a redact function was accepted")
	}
}

func TestWithoutEndpointNothingIsRecorded(t *testing.T) {
	tr, err := telemetry.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := tr.StartRun(context.Background(), &kernel.Run{ID: "r", RootID: "r"})
	defer end("succeeded")
	if trace.SpanFromContext(ctx).IsRecording() {
		t.Fatal("a span is recorded with no exporter configured")
	}
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Tracer: tr})})
	if err != nil {
		t.Fatal(err)
	}
	g := build(t, graph.New("quiet").Add("echo", builtin.Echo()))
	if res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")}); res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestNewLeavesOtelGlobalsAlone(t *testing.T) {
	before := otel.GetTracerProvider()
	r, spans := traced(t, telemetry.Options{})
	g := build(t, graph.New("g").Add("echo", builtin.Echo()))
	r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if len(spans()) != 2 {
		t.Fatal("spans were not exported")
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("the global tracer provider was replaced")
	}
}

// collector is a fake OTLP/HTTP collector on loopback.
type collector struct {
	mu     sync.Mutex
	paths  []string
	auth   []string
	bodies [][]byte
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.paths, c.auth, c.bodies = append(c.paths, r.URL.Path), append(c.auth, r.Header.Get("Authorization")), append(c.bodies, b)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func TestOTLPEndpointReceivesContentFreeSpans(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	tr, err := telemetry.New(&telemetry.Options{OTLPEndpoint: srv.URL, OTLPHeaders: map[string]string{"Authorization": "Bearer collector-token"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Tracer: tr})})
	if err != nil {
		t.Fatal(err)
	}
	g := build(t, graph.New("otlp").Add("boom", builtin.Fail("said "+canary, false)))
	r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text(canary), Principal: "carol"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.bodies) == 0 {
		t.Fatal("the collector received nothing")
	}
	var all []byte
	for i, b := range col.bodies {
		if col.paths[i] != "/v1/traces" || col.auth[i] != "Bearer collector-token" {
			t.Fatalf("export %d: path %q auth %q", i, col.paths[i], col.auth[i])
		}
		all = append(all, b...)
	}
	for _, want := range []string{telemetry.SpanRun, telemetry.SpanCall, "carol", "boom"} {
		if !strings.Contains(string(all), want) {
			t.Errorf("the export lacks %q", want)
		}
	}
	if strings.Contains(string(all), canary) {
		t.Fatal("the export holds content")
	}
}

func TestBadOTLPEndpointIsRefused(t *testing.T) {
	for _, ep := range []string{"localhost:4318", "ftp://collector", "http://", "::"} {
		if _, err := telemetry.New(&telemetry.Options{OTLPEndpoint: ep}); err == nil {
			t.Errorf("endpoint %q was accepted", ep)
		}
	}
}
