package run_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/kerneltest"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
)

func compileYAML(t *testing.T, src string) *graph.Graph {
	t.Helper()
	spec, err := graph.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := graph.NewRegistry()
	builtin.Register(r)
	g, err := graph.Compile(spec, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func runIt(t *testing.T, g *graph.Graph, in agent.Message) *run.Result {
	t.Helper()
	return newRunner(t, nil).Run(context.Background(), &run.Request{Graph: g, Input: in, Principal: "local:test"})
}

func TestBranchRunsOnlyTheChosenSuccessor(t *testing.T) {
	g := compileYAML(t, `
name: br
nodes:
  - name: classify
    agent: builtin:template
    with: {text: '{{if contains .input "crash"}}bug{{else}}question{{end}}'}
    branch: {cases: {bug: [fix], question: [answer]}}
  - {name: fix, after: [classify], agent: builtin:template, with: {text: "fixing"}}
  - {name: answer, after: [classify], agent: builtin:template, with: {text: "answering"}}
  - {name: after_fix, after: [fix], agent: builtin:upper}
`)
	res := runIt(t, g, agent.Text("it crashes"))
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if node(res, "fix").Status != run.NodeSucceeded || node(res, "answer").Status != run.NodeSkipped {
		t.Fatalf("trace %+v", res.Trace)
	}
	if node(res, "classify").Route != "bug" || res.Output.Text() != "FIXING" {
		t.Fatalf("route %q output %q", node(res, "classify").Route, res.Output.Text())
	}
}

func TestBarriers(t *testing.T) {
	g := compileYAML(t, `
name: barriers
nodes:
  - {name: ok1, after: [], agent: builtin:upper}
  - {name: ok2, after: [], agent: builtin:lower}
  - {name: bad, after: [], agent: builtin:fail}
  - {name: any, after: [bad, ok1], barrier: any, agent: builtin:echo}
  - {name: two, after: [ok1, ok2, bad], barrier: k_of_n, k: 2, agent: builtin:echo}
  - {name: opt, after: [ok1, bad], barrier: optional, agent: builtin:echo}
  - {name: end, after: [any, two, opt], agent: builtin:echo}
`)
	res := runIt(t, g, agent.Text("Hi"))
	if res.Status != run.StatusSucceeded {
		t.Fatalf("a failure absorbed by tolerant barriers should not fail the run: %s %s %+v", res.Status, res.Error, res.Trace)
	}
	v, _ := res.Output.Any()
	b, _ := json.Marshal(v)
	got := string(b)
	for _, want := range []string{`"opt":{"ok1":"HI"}`, `"any":{"ok1":"HI"}`, `"two":{"ok1":"HI","ok2":"hi"}`} {
		if !strings.Contains(got, want) {
			t.Errorf("output %s lacks %s", got, want)
		}
	}
	if node(res, "bad").Status != run.NodeFailed {
		t.Fatalf("bad: %+v", node(res, "bad"))
	}
}

func TestFailureUnderAllBarrierFailsRun(t *testing.T) {
	g := compileYAML(t, `
name: f
nodes:
  - {name: bad, agent: builtin:fail, with: {message: "boom"}}
  - {name: next, agent: builtin:echo}
`)
	res := runIt(t, g, agent.Text("x"))
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, "boom") {
		t.Fatalf("%s %q", res.Status, res.Error)
	}
	if s := node(res, "next").Status; s != run.NodeSkipped {
		t.Fatalf("next: %s", s)
	}
}

func TestBoundedLoopStopsWhenConditionHolds(t *testing.T) {
	spec, err := graph.LoadFile("../graph/testdata/good/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := graph.NewRegistry()
	builtin.Register(r)
	g, err := graph.Compile(spec, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := runIt(t, g, agent.Text("v"))
	if res.Status != run.StatusSucceeded || res.Output.Text() != "V+++" {
		t.Fatalf("%s %q %s", res.Status, res.Output.Text(), res.Error)
	}
	if it := node(res, "review").Iterations; it != 3 {
		t.Fatalf("iterations = %d, want 3", it)
	}
}

func TestLoopStopsAtItsBound(t *testing.T) {
	g := compileYAML(t, `
name: bound
nodes:
  - {name: draft, agent: builtin:template, with: {text: "{{.input}}+"}}
  - {name: review, agent: builtin:echo, loop: {to: draft, max: 4, until: {contains: "never"}}}
`)
	res := runIt(t, g, agent.Text(""))
	if res.Status != run.StatusSucceeded || res.Output.Text() != "++++" {
		t.Fatalf("%s %q", res.Status, res.Output.Text())
	}
	if w := node(res, "review").Warnings; len(w) == 0 || !strings.Contains(w[0], "bound of 4") {
		t.Fatalf("warnings %v", w)
	}
}

func TestGateOutcomes(t *testing.T) {
	g := compileYAML(t, `
name: gates
nodes:
  - {name: warn, after: [], agent: builtin:echo, gate: {check: {min_length: 100}, on_fail: warn}}
  - {name: pass, after: [], agent: builtin:echo, gate: {check: {contains: "ok"}}}
`)
	res := runIt(t, g, agent.Text("ok"))
	if res.Status != run.StatusSucceeded || len(node(res, "warn").Warnings) != 1 {
		t.Fatalf("%s %+v", res.Status, res.Trace)
	}
	g = compileYAML(t, `
name: gatefail
nodes:
  - {name: strict, agent: builtin:echo, gate: {check: {matches: "^[0-9]+$"}, on_fail: retry, retries: 2}}
`)
	res = runIt(t, g, agent.Text("abc"))
	if res.Status != run.StatusFailed || node(res, "strict").Attempts != 3 || !strings.Contains(res.Error, "gate failed") {
		t.Fatalf("%s attempts=%d %q", res.Status, node(res, "strict").Attempts, res.Error)
	}
}

func TestStepBudgetTrips(t *testing.T) {
	g := compileYAML(t, `
name: steps
nodes:
  - {name: draft, agent: builtin:echo}
  - {name: review, agent: builtin:echo, loop: {to: draft, max: 50}}
limits: {max_steps: 7}
`)
	res := runIt(t, g, agent.Text("x"))
	if res.Status != run.StatusLimitExceeded || !strings.Contains(res.Error, "steps") {
		t.Fatalf("%s %q", res.Status, res.Error)
	}
}

func TestEventsInOrder(t *testing.T) {
	g := build(t, graph.New("ev").Add("a", builtin.Trim()).Add("b", builtin.Upper()))
	var mu sync.Mutex
	var types []string
	newRunner(t, nil).Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x"), OnEvent: func(e run.Event) {
		mu.Lock()
		types = append(types, e.Type+":"+e.Node)
		mu.Unlock()
	}})
	want := "run.started: node.started:a node.finished:a node.started:b node.finished:b run.finished:"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

// The callable-spread vector: upstream output cannot inject an argument.
func TestFuncRejectsUndeclaredField(t *testing.T) {
	type transfer struct {
		Amount int    `json:"amount"`
		To     string `json:"to"`
	}
	var ran bool
	fn := agent.MustFunc("transfer", func(ctx context.Context, in transfer) (string, error) {
		ran = true
		return "sent", nil
	}, nil)
	g := build(t, graph.New("spread").Add("transfer", fn))
	for _, in := range []string{`{"amount":1,"to":"x","admin":true}`, `{"amount":1,"to":"x","Admin":true}`} {
		res := runIt(t, g, agent.JSON(json.RawMessage(in)))
		if e := strings.ToLower(res.Error); res.Status != run.StatusFailed || !strings.Contains(e, `"admin"`) && !strings.Contains(e, `'admin'`) {
			t.Fatalf("input %s: %s %q", in, res.Status, res.Error)
		}
	}
	if ran {
		t.Fatal("the function ran with an injected field")
	}
	res := runIt(t, g, agent.JSON(json.RawMessage(`{"amount":1,"to":"x"}`)))
	if res.Status != run.StatusSucceeded || !ran {
		t.Fatalf("valid input: %s %q", res.Status, res.Error)
	}
}

func TestAgentsRunOnlyThroughKernel(t *testing.T) {
	p := &kerneltest.Probe{}
	planner := agent.MustFunc("planner", func(ctx context.Context, in string) (string, error) {
		out, err := agent.ToolsFrom(ctx).Call(ctx, "probe_tool", json.RawMessage(`"from tool"`))
		if err != nil {
			return "", err
		}
		if _, err := agent.ToolsFrom(ctx).Call(ctx, "not_declared", json.RawMessage(`{}`)); err == nil {
			return "", context.Canceled
		}
		return out.Text(), nil
	}, nil)
	g := build(t, graph.New("k").Add("node_probe", p).Add("planner", planner, graph.Tools("probe_tool")).Tool("probe_tool", p))
	res := runIt(t, g, agent.Text("x"))
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s %s", res.Status, res.Error)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if p.Calls() != 2 || res.Steps != 3 {
		t.Fatalf("calls=%d steps=%d; want 2 probe calls and 3 steps (tool calls draw from the run's budget)", p.Calls(), res.Steps)
	}
}

func TestRunInputFromCallerKeepsDeadlineLowerOnly(t *testing.T) {
	g := build(t, graph.New("d").Add("s", builtin.Sleep(2*time.Second, false)))
	start := time.Now()
	res := newRunner(t, &run.Config{Limits: run.Limits{Deadline: 100 * time.Millisecond}}).Run(context.Background(),
		&run.Request{Graph: g, Input: agent.Text("x"), Deadline: time.Hour})
	if res.Status != run.StatusLimitExceeded || time.Since(start) > time.Second {
		t.Fatalf("%s after %v", res.Status, time.Since(start))
	}
}

func TestSubRunsShareTheParentBudgetAndDepthIsCapped(t *testing.T) {
	r := newRunner(t, nil)
	g := build(t, graph.New("child").Add("a", builtin.Echo()).Add("b", builtin.Echo()))
	parent := &kernel.Run{ID: "parent", RootID: "parent", Budget: kernel.NewBudget(3, 0)}
	first := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x"), Parent: parent})
	if first.Status != run.StatusSucceeded {
		t.Fatal(first.Status, first.Error)
	}
	if used, _ := parent.Budget.Used(); used != 2 {
		t.Fatalf("the parent's budget shows %d steps used, want 2", used)
	}
	second := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x"), Parent: parent})
	if second.Status != run.StatusLimitExceeded {
		t.Fatalf("a child ran past its parent's budget: %s", second.Status)
	}
	deep := &kernel.Run{ID: "deep", RootID: "root", Depth: run.MaxDelegationDepth, Budget: kernel.NewBudget(100, 0)}
	if res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x"), Parent: deep}); res.Status != run.StatusLimitExceeded || !strings.Contains(res.Error, "delegation depth") {
		t.Fatalf("%s %s", res.Status, res.Error)
	}
}
