package service

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

func compile(t testing.TB, yaml string) *graph.Graph {
	t.Helper()
	spec, err := graph.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Compile(spec, catalog.Registry(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const upperGraph = `
name: up
nodes:
  - {name: trim, agent: "builtin:trim"}
  - {name: upper, agent: "builtin:upper"}
`

const slowGraph = `
name: slow
nodes:
  - {name: nap, agent: "builtin:sleep", with: {duration: 30s}, timeout: 1h}
`

func newService(t testing.TB, opts *Options, yamls ...string) *Service {
	t.Helper()
	var gs []*graph.Graph
	for _, y := range yamls {
		gs = append(gs, compile(t, y))
	}
	s, err := New(gs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

var alice, bob = Principal{ID: "token:alice", Kind: "token"}, Principal{ID: "token:bob", Kind: "token"}

func TestRunIsRecordedUnderItsPrincipal(t *testing.T) {
	s := newService(t, nil, upperGraph)
	v, err := s.Run(context.Background(), alice, &StartRequest{Graph: "up", Input: agent.Text(" a ")})
	if err != nil {
		t.Fatal(err)
	}
	if v.Principal != alice.ID || v.Status != run.StatusSucceeded || v.OutputText() != "A" {
		t.Errorf("%+v", v)
	}
	if _, err := s.Get(context.Background(), bob, v.RunID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob: %v", err)
	}
	if got, err := s.Get(context.Background(), alice, v.RunID); err != nil || string(got.JSON) != string(v.JSON) {
		t.Errorf("alice: %v", err)
	}
}

func TestAuthorizerFailsClosed(t *testing.T) {
	for name, a := range map[string]Authorizer{
		"error": AuthorizerFunc(func(context.Context, string, string, string) error { return errors.New("no") }),
		"panic": AuthorizerFunc(func(context.Context, string, string, string) error { panic("boom") }),
	} {
		s := newService(t, &Options{Authorizer: a}, upperGraph)
		_, err := s.Run(context.Background(), alice, &StartRequest{Graph: "up", Input: agent.Text("x")})
		if e := AsError(err); e.Code != CodeForbidden {
			t.Errorf("%s: %v", name, err)
		}
		if gs, err := s.Graphs(context.Background(), alice); err != nil || len(gs) != 0 {
			t.Errorf("%s: graphs %v %v", name, gs, err)
		}
	}
	// No principal at all is refused whatever the authorizer.
	s := newService(t, nil, upperGraph)
	if _, err := s.Run(context.Background(), Principal{}, &StartRequest{Graph: "up", Input: agent.Text("x")}); AsError(err).Code != CodeUnauthorized {
		t.Errorf("no principal: %v", err)
	}
}

// granting lets operators read every run, as policy's all_runs does.
type granting struct{}

func (granting) Authorize(context.Context, string, string, string) error { return nil }
func (granting) AuthorizeRun(_ context.Context, p, action, graph, owner string) error {
	if p == owner || p == "token:operator" {
		return nil
	}
	return errors.New("not yours")
}

func TestRunAuthorizerMayGrantAnothersRun(t *testing.T) {
	s := newService(t, &Options{Authorizer: granting{}}, upperGraph)
	v, err := s.Run(context.Background(), alice, &StartRequest{Graph: "up", Input: agent.Text("x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), Principal{ID: "token:operator"}, v.RunID); err != nil {
		t.Errorf("operator: %v", err)
	}
	if _, err := s.Get(context.Background(), bob, v.RunID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob: %v", err)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	s := newService(t, &Options{History: 3, Rate: -1}, upperGraph)
	var ids []string
	for range 5 {
		v, err := s.Run(context.Background(), alice, &StartRequest{Graph: "up", Input: agent.Text("x")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.RunID)
	}
	if _, err := s.Get(context.Background(), alice, ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest run is still kept: %v", err)
	}
	list, err := s.List(context.Background(), alice, 10)
	if err != nil || len(list) != 3 || list[0].RunID != ids[4] {
		t.Errorf("list: %v %d", err, len(list))
	}
}

func TestCloseCancelsRunsAndRefusesNewOnes(t *testing.T) {
	s, err := New([]*graph.Graph{compile(t, slowGraph)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Start(context.Background(), alice, &StartRequest{Graph: "slow", Input: agent.Text("x")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(context.Background(), alice, id); err != nil || v.Status != run.StatusCancelled {
		t.Errorf("after close: %v %+v", err, v)
	}
	if _, err := s.Start(context.Background(), alice, &StartRequest{Graph: "slow", Input: agent.Text("x")}); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("start after close: %v", err)
	}
}

func TestClampDeadline(t *testing.T) {
	s := newService(t, &Options{RunDeadline: time.Minute}, upperGraph)
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), -1e-9} {
		if _, err := s.ClampDeadline(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	for in, want := range map[float64]time.Duration{1e18: time.Minute, 60: time.Minute, 1.5: 1500 * time.Millisecond, 1e-12: time.Millisecond} {
		if got, err := s.ClampDeadline(in); err != nil || got != want {
			t.Errorf("%v: %v %v, want %v", in, got, err, want)
		}
	}
}

func TestTooDeepIsLinearAndExact(t *testing.T) {
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if tooDeep(nest(64), 64) || !tooDeep(nest(65), 64) {
		t.Error("off by one")
	}
	if tooDeep([]byte(`{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"[["}`), 3) {
		t.Error("brackets in strings counted")
	}
	start := time.Now()
	tooDeep(nest(1<<20), 64)
	if time.Since(start) > time.Second {
		t.Error("slow on a deep input")
	}
}

func TestAppendViewMatchesEncodingJSON(t *testing.T) {
	weird := "a\"b\\c\x00\x1f\b\f\n\r\t<>&\u2028\u2029é😀\xff\xfe end"
	views := []viewJSON{
		{RunID: "r", Graph: "g", Principal: "p", Status: run.StatusSucceeded, Output: json.RawMessage(`"x"`), Trace: []run.NodeTrace{}, StartedAt: time.Unix(0, 0).UTC()},
		{RunID: weird, Graph: weird, Principal: weird, Status: run.Status(weird), Output: json.RawMessage(" { \"k\" : [ 1 , 2.5e-10, \"<&>\u2028\" ] , \"s\":\"a \\\" b\" } "),
			Error: weird, ErrorCode: Code(weird), CorrelationID: weird, Labels: agent.Labels(0).With(agent.Sensitive).With(agent.Untrusted), Steps: -3,
			Trace: []run.NodeTrace{{Node: weird, Status: run.NodeFailed, DurationMS: 1e-7, Attempts: 2, Iterations: 3, Error: weird, Warnings: []string{weird, ""}, Route: weird, Labels: []string{"untrusted"}},
				{Node: "n", DurationMS: 1e21}, {Node: "m", DurationMS: 0.123456789}, {Node: "z", DurationMS: 123456789.5}},
			StartedAt: time.Date(2026, 11, 29, 9, 0, 0, 123456789, time.FixedZone("x", 3600)), FinishedAt: time.Date(2026, 11, 29, 9, 0, 1, 0, time.UTC)},
		{Output: json.RawMessage(`null`)},
	}
	for i, vj := range views {
		want, err := json.Marshal(vj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendView(nil, &vj)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("view %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if _, err := appendView(nil, &viewJSON{Output: json.RawMessage(`{bad`)}); err == nil {
		t.Error("invalid output accepted")
	}
}

func FuzzAppendStringMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00\u2028<>&\"\\", "\xff\xc0\x80", "é😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s want %s", s, got, want)
		}
		raw, _ := json.Marshal(map[string]string{s: s})
		if got, want := appendCompact(nil, raw), mustMarshal(json.RawMessage(raw)); string(got) != string(want) {
			t.Errorf("compact %q: got %s want %s", raw, got, want)
		}
	})
}

func mustMarshal(v any) []byte { b, _ := json.Marshal(v); return b }

// pausing is an Executor whose runs pause for approval, as the engine's do
// when a call needs a human; it records cancellations.
type pausing struct{ cancelled []string }

func (p *pausing) Execute(_ context.Context, x *Execution) *run.Result {
	now := time.Now()
	return &run.Result{RunID: x.RunID, Graph: x.Graph.Name, Principal: x.Principal, Status: run.StatusAwaitingApproval,
		Error: "node upper: awaiting approval a1: consequential", StartedAt: now, FinishedAt: now,
		Trace: []run.NodeTrace{{Node: "upper", Status: run.NodeWaiting, Error: "awaiting approval a1"}}}
}

func (p *pausing) Cancel(_ context.Context, id string) bool {
	p.cancelled = append(p.cancelled, id)
	return true
}

func TestCancellingAPausedRunVoidsItsApprovals(t *testing.T) {
	x := &pausing{}
	s := newService(t, &Options{Executor: x}, upperGraph)
	v, err := s.Run(context.Background(), alice, &StartRequest{Graph: "up", Input: agent.Text("x")})
	if err != nil || v.Status != run.StatusAwaitingApproval || v.Code != CodeAwaitingApproval {
		t.Fatalf("%v %+v", err, v)
	}
	if _, err := s.Cancel(context.Background(), bob, v.RunID); !errors.Is(err, ErrNotFound) || len(x.cancelled) != 0 {
		t.Errorf("bob cancelling alice's paused run: %v %v", err, x.cancelled)
	}
	got, err := s.Cancel(context.Background(), alice, v.RunID)
	if err != nil || got.Status != run.StatusCancelled || len(x.cancelled) != 1 || x.cancelled[0] != v.RunID {
		t.Errorf("cancel: %v %+v %v", err, got, x.cancelled)
	}
	if again, _ := s.Get(context.Background(), alice, v.RunID); again.Status != run.StatusCancelled || !strings.Contains(string(again.JSON), `"status":"cancelled"`) {
		t.Errorf("after cancel: %s", again.JSON)
	}
}
