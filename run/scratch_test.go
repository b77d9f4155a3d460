package run

import (
	"context"
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
