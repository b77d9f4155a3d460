package run_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

func newRunner(t testing.TB, cfg *run.Config) *run.Runner {
	t.Helper()
	r, err := run.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func build(t testing.TB, b *graph.Builder) *graph.Graph {
	t.Helper()
	g, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func node(res *run.Result, name string) run.NodeTrace {
	for _, n := range res.Trace {
		if n.Node == name {
			return n
		}
	}
	return run.NodeTrace{}
}

func TestChainPassesOutputAlong(t *testing.T) {
	g := build(t, graph.New("chain").Add("trim", builtin.Trim()).Add("upper", builtin.Upper()))
	res := newRunner(t, nil).Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("  hello  ")})
	if res.Status != run.StatusSucceeded || res.Output.Text() != "HELLO" {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
}

func TestFanOutJoinReceivesObjectKeyedByUpstream(t *testing.T) {
	b := graph.New("fan").Add("src", builtin.Trim()).
		Add("a", builtin.Upper(), graph.After("src")).
		Add("b", builtin.Lower(), graph.After("src")).
		Add("join", builtin.Echo(), graph.After("a", "b"))
	res := newRunner(t, nil).Run(context.Background(), &run.Request{Graph: build(t, b), Input: agent.Text(" Hi ")})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	v, _ := res.Output.Any()
	m, _ := v.(map[string]any)
	if m["a"] != "HI" || m["b"] != "hi" {
		t.Fatalf("join input = %v", v)
	}
}

func TestNodePastItsTimeoutIsCutOff(t *testing.T) {
	b := graph.New("slow").Add("slow", builtin.Sleep(10*time.Second, false), graph.Timeout(50*time.Millisecond))
	start := time.Now()
	res := newRunner(t, nil).Run(context.Background(), &run.Request{Graph: build(t, b), Input: agent.Text("x")})
	if res.Status != run.StatusFailed || !strings.Contains(node(res, "slow").Error, "timed out") {
		t.Fatalf("got %s %+v", res.Status, res.Trace)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("took %v", el)
	}
}

func TestNodeIgnoringContextDoesNotHoldRunPastDeadline(t *testing.T) {
	stuck := make(chan struct{})
	ignorer := agent.MustFunc("ignorer", func(ctx context.Context, in string) (string, error) {
		<-stuck // ignores ctx entirely
		return in, nil
	}, nil)
	defer close(stuck)
	b := graph.New("stuck").Add("ignorer", ignorer)
	start := time.Now()
	res := newRunner(t, &run.Config{Grace: 50 * time.Millisecond}).Run(context.Background(),
		&run.Request{Graph: build(t, b), Input: agent.Text("x"), Deadline: 200 * time.Millisecond})
	el := time.Since(start)
	if res.Status != run.StatusLimitExceeded {
		t.Fatalf("status %s, want limit_exceeded", res.Status)
	}
	if el > time.Second {
		t.Fatalf("run returned after %v; deadline was 200ms", el)
	}
}

func TestCancelEndsRunPromptly(t *testing.T) {
	b := graph.New("cancel").Add("a", builtin.Sleep(time.Minute, false)).
		Add("b", builtin.Sleep(time.Minute, false), graph.After())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	start := time.Now()
	res := newRunner(t, nil).Run(ctx, &run.Request{Graph: build(t, b), Input: agent.Text("x")})
	if res.Status != run.StatusCancelled {
		t.Fatalf("status %s", res.Status)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("took %v", el)
	}
	for _, n := range res.Trace {
		if n.Status != run.NodeCancelled {
			t.Fatalf("node %s is %s", n.Node, n.Status)
		}
	}
}

func TestPanicFailsOnlyItsNode(t *testing.T) {
	boom := agent.MustFunc("boom", func(ctx context.Context, in string) (string, error) { panic("kaboom") }, nil)
	b := graph.New("panic").Add("ok", builtin.Upper()).Add("boom", boom, graph.After())
	res := newRunner(t, nil).Run(context.Background(), &run.Request{Graph: build(t, b), Input: agent.Text("x")})
	if res.Status != run.StatusFailed || !strings.Contains(node(res, "boom").Error, "kaboom") {
		t.Fatalf("got %s %+v", res.Status, res.Trace)
	}
	if s := node(res, "ok").Status; s != run.NodeSucceeded && s != run.NodeCancelled {
		t.Fatalf("ok node: %s", s)
	}
}

func TestRetryWithBackoff(t *testing.T) {
	var calls atomic.Int32
	flaky := agent.MustFunc("flaky", func(ctx context.Context, in string) (string, error) {
		if calls.Add(1) < 3 {
			return "", errors.New("transient")
		}
		return "ok", nil
	}, nil)
	b := graph.New("retry").Add("flaky", flaky, graph.Retry(3, time.Millisecond))
	res := newRunner(t, nil).Run(context.Background(), &run.Request{Graph: build(t, b), Input: agent.Text("x")})
	if res.Status != run.StatusSucceeded || node(res, "flaky").Attempts != 3 {
		t.Fatalf("got %s attempts=%d", res.Status, node(res, "flaky").Attempts)
	}
}

func TestRunCancelledBeforeItStartsIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := build(t, graph.New("c").Add("a", builtin.Echo()))
	if res := newRunner(t, nil).Run(ctx, &run.Request{Graph: g, Input: agent.Text("x")}); res.Status != run.StatusCancelled {
		t.Fatalf("status %s", res.Status)
	}
}
