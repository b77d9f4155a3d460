package run

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// stuck ignores its context until released.
type stuck struct{ release chan struct{} }

func (s stuck) Card() agent.Card { return agent.Card{Name: "test:stuck", Kind: "fn"} }
func (s stuck) Run(_ context.Context, in agent.Message) (agent.Message, error) {
	<-s.release
	return in, nil
}

// A run that abandoned a node does not give its node states back for
// another run to reuse: the abandoned node's goroutine may still touch
// them when its agent returns. A run whose nodes all returned does.
func TestAbandonedRunKeepsItsScratch(t *testing.T) {
	release := make(chan struct{})
	g, err := graph.New("abandon").
		Add("stuck", stuck{release: release}, graph.Timeout(20*time.Millisecond)).
		Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(&Config{Grace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Catch the run's exec while it waits on the stuck node.
	caught := make(chan *exec, 1)
	go func() {
		for {
			r.mu.Lock()
			e := r.active
			r.mu.Unlock()
			if e != nil {
				caught <- e
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	res := r.Run(context.Background(), &Request{Graph: g, Input: agent.Text("x")})
	if res.Status != StatusFailed || res.Trace[0].Status != NodeFailed {
		t.Fatalf("run %s, node %s (%s); want the stuck node to time out", res.Status, res.Trace[0].Status, res.Error)
	}
	if d := res.Trace[0].DurationMS; d < 20 {
		t.Errorf("the abandoned node's trace says it ran %v ms; it ran past its 20ms timeout", d)
	}
	e := <-caught
	e.mu.Lock()
	abandoned, left := e.abandoned, e.scratch
	e.mu.Unlock()
	if !abandoned || left != nil {
		t.Fatalf("abandoned %v, scratch kept on the exec %v: want the run marked abandoned and its scratch let go", abandoned, left != nil)
	}
	// The stuck agent returns at last: its goroutine ends the attempt on
	// the states the run left (a nil slice here used to crash it).
	close(release)
	for until := time.Now().Add(5 * time.Second); e.states[0].attempt.Load() != nil; {
		if time.Now().After(until) {
			t.Fatal("the abandoned attempt never ended")
		}
		time.Sleep(time.Millisecond)
	}

	// What release does with a scratch, abandoned or not: an abandoned
	// run's never comes back from the pool (20 tries, so a pool that
	// drops some puts, as under the race detector, still shows it).
	n := 3
	for range 20 {
		gave := &exec{scratch: getScratch(n), abandoned: true}
		s := gave.scratch
		gave.release()
		if got := getScratch(n); got == s {
			t.Fatal("an abandoned run's scratch was reused")
		}
	}
	reused := false
	for range 20 {
		gave := &exec{scratch: getScratch(n)}
		s := gave.scratch
		gave.release()
		if getScratch(n) == s {
			reused = true
			break
		}
	}
	if !reused {
		t.Fatal("a finished run's scratch never came back from the pool")
	}
}

// sometimesStuck ignores its context until released when its input says
// so; stuck counts the calls it holds.
type sometimesStuck struct {
	release chan struct{}
	stuck   *atomic.Int32
}

func (sometimesStuck) Card() agent.Card { return agent.Card{Name: "test:sometimes", Kind: "fn"} }
func (s sometimesStuck) Run(_ context.Context, in agent.Message) (agent.Message, error) {
	if len(in.Parts) > 0 && len(in.Parts[0].Text) > 0 && in.Parts[0].Text[0] == '!' {
		s.stuck.Add(1)
		defer s.stuck.Add(-1)
		<-s.release // past its timeout and the grace period
	}
	return in, nil
}

// Runs that reuse earlier runs' execs and node states, side by side with
// runs that abandon a node and with the Runner's keeper looking through the
// runs in flight, each report their own input, id and trace (run with
// -race: a run touching another's state shows up there too).
func TestReusedRunStateStaysApart(t *testing.T) {
	// Timeouts long enough that a node that does not hang never times out
	// on a busy machine under the race detector; short enough that the
	// keeper scans often.
	release, stuck := make(chan struct{}), new(atomic.Int32)
	agentOf := sometimesStuck{release: release, stuck: stuck}
	defer func() {
		// Let the abandoned calls return before the next test counts
		// goroutines.
		close(release)
		for until := time.Now().Add(5 * time.Second); stuck.Load() > 0 && time.Now().Before(until); {
			time.Sleep(time.Millisecond)
		}
	}()
	g, err := graph.New("reuse").
		Add("a", agentOf, graph.Timeout(100*time.Millisecond)).
		Add("b", agentOf, graph.Timeout(100*time.Millisecond)).
		Add("c", agentOf, graph.Timeout(100*time.Millisecond)).
		Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(&Config{Grace: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const workers, runs = 8, 150
	errs := make(chan error, workers)
	ids := make(chan string, workers*runs)
	for w := range workers {
		go func() {
			for i := range runs {
				in := fmt.Sprintf("w%d-%d", w, i)
				stuck := i%50 == 7
				if stuck {
					in = "!" + in
				}
				res := r.Run(context.Background(), &Request{Graph: g, Input: agent.Text(in)})
				ids <- res.RunID
				switch {
				case stuck && (res.Status != StatusFailed || res.Trace[0].Status != NodeFailed):
					errs <- fmt.Errorf("%s: run %s, first node %s; want it timed out", in, res.Status, res.Trace[0].Status)
					return
				case !stuck && (res.Status != StatusSucceeded || res.Output.Text() != in || len(res.Trace) != 3):
					errs <- fmt.Errorf("%s: run %s with output %q and %d trace lines (%s)", in, res.Status, res.Output.Text(), len(res.Trace), res.Error)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("run id %s reported twice", id)
		}
		seen[id] = true
	}
}
