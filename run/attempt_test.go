package run_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// keepCtx hands the context it ran with to a test, then does what f says.
type keepCtx struct {
	got chan context.Context
	f   func(ctx context.Context) error
}

func (k keepCtx) Card() agent.Card { return agent.Card{Name: "test:keepctx", Kind: "fn"} }
func (k keepCtx) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	k.got <- ctx
	if k.f != nil {
		if err := k.f(ctx); err != nil {
			return agent.Message{}, err
		}
	}
	return in, nil
}

// probe runs f while the run is still going.
type probe func()

func (p probe) Card() agent.Card { return agent.Card{Name: "test:probe", Kind: "fn"} }
func (p probe) Run(_ context.Context, in agent.Message) (agent.Message, error) {
	p()
	return in, nil
}

// A node's context carries the node's deadline, and is done as soon as the
// node returns, while the run goes on, whether or not the agent ever waited
// on it.
func TestNodeContextHasItsDeadlineAndEndsWithTheCall(t *testing.T) {
	for _, wait := range []bool{false, true} {
		got := make(chan context.Context, 1)
		a := keepCtx{got: got}
		if wait {
			a.f = func(ctx context.Context) error { _ = ctx.Done(); return nil }
		}
		var errAfter error
		var doneAfter bool
		later := probe(func() {
			ctx := <-got
			errAfter = ctx.Err()
			select {
			case <-ctx.Done():
				doneAfter = true
			default:
			}
			got <- ctx
		})
		r := newRunner(t, nil)
		g := build(t, graph.New("ctx").Add("a", a, graph.Timeout(7*time.Second)).Add("b", later))
		start := time.Now()
		res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
		if res.Status != run.StatusSucceeded {
			t.Fatalf("%s: %s", res.Status, res.Error)
		}
		if !errors.Is(errAfter, context.Canceled) || !doneAfter {
			t.Errorf("waited %v: once a returned, while b ran, its context had Err = %v, Done closed %v; want Canceled, closed", wait, errAfter, doneAfter)
		}
		ctx := <-got
		dl, ok := ctx.Deadline()
		if want := start.Add(7 * time.Second); !ok || dl.Before(want.Add(-time.Second)) || dl.After(want.Add(time.Second)) {
			t.Errorf("waited %v: deadline %v, %v; want about %v", wait, dl, ok, want)
		}
	}
}

// At a node's timeout its context, and one the agent derived from it, end
// with DeadlineExceeded as their cause.
func TestNodeTimeoutEndsDerivedContexts(t *testing.T) {
	got := make(chan context.Context, 1)
	derived := make(chan error, 1)
	a := keepCtx{got: got, f: func(ctx context.Context) error {
		child, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		<-child.Done()
		derived <- context.Cause(child)
		return ctx.Err()
	}}
	r := newRunner(t, nil)
	g := build(t, graph.New("timeout").Add("a", a, graph.Timeout(50*time.Millisecond)))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if res.Status != run.StatusFailed {
		t.Fatalf("status %s, want failed", res.Status)
	}
	if cause := <-derived; !errors.Is(cause, context.DeadlineExceeded) {
		t.Errorf("derived context's cause = %v, want DeadlineExceeded", cause)
	}
	if ctx := <-got; !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("node context's cause = %v, want DeadlineExceeded", context.Cause(ctx))
	}
}

// A node's timeout counts from when it runs, not from when it was ready:
// waiting for a concurrency slot is not the node's time.
func TestWaitingForAConcurrencySlotIsNotTheNodesTime(t *testing.T) {
	r := newRunner(t, &run.Config{Concurrency: 1})
	g := build(t, graph.New("slots").
		Add("a", builtin.Sleep(300*time.Millisecond, false), graph.After(), graph.Timeout(450*time.Millisecond)).
		Add("b", builtin.Sleep(300*time.Millisecond, false), graph.After(), graph.Timeout(450*time.Millisecond)))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s (one slot: the second node waits 300 ms, then needs 300 of its 450)", res.Status, res.Error)
	}
	for _, tr := range res.Trace {
		if tr.DurationMS < 250 || tr.DurationMS > 420 {
			t.Errorf("node %s took %.0f ms, want about 300: its own time, not its wait", tr.Node, tr.DurationMS)
		}
	}
}

// An agent that keeps its context after its call returns still sees its
// own call through it (run, node, attempt), and the context stays ended,
// after later runs of the same graph have reused the run's state.
func TestKeptContextOutlivesReuse(t *testing.T) {
	got := make(chan context.Context, 1)
	g := build(t, graph.New("keep").Add("a", keepCtx{got: got}))
	r := newRunner(t, nil)
	first := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if first.Status != run.StatusSucceeded {
		t.Fatalf("first run: %s (%s)", first.Status, first.Error)
	}
	kept := <-got
	for range 50 {
		res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("y")})
		if res.Status != run.StatusSucceeded {
			t.Fatalf("later run: %s (%s)", res.Status, res.Error)
		}
		<-got
	}
	ci := agent.CallInfoFrom(kept)
	if ci == nil || ci.RunID != first.RunID || ci.Node != "a" || ci.Attempt != 1 {
		t.Fatalf("kept context's call: %+v, want run %s node a attempt 1", ci, first.RunID)
	}
	if !errors.Is(kept.Err(), context.Canceled) {
		t.Fatalf("kept context's Err = %v, want Canceled", kept.Err())
	}
}
