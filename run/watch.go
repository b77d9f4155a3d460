package run

import (
	"context"
	"sync"
	"time"

	"github.com/babelagent/babel/graph"
)

// attemptCtx is one attempt's context: the run's, with the node's deadline.
// The run's watch cancels it when the deadline passes, so an attempt costs
// no timer of its own.
type attemptCtx struct {
	context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time
	node     *graph.Node
	gen      int
	attempt  int
	// guarded by watch.mu
	slot      int
	expired   bool
	abandoned bool
}

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Err reports DeadlineExceeded once the deadline cut the attempt off, as a
// context.WithTimeout would.
func (c *attemptCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// watch enforces the deadlines of a run's attempts with one timer, armed for
// the earliest: at its deadline an attempt is cancelled, and if the agent
// has not returned a grace period later the coordinator is told it was
// abandoned.
type watch struct {
	mu   sync.Mutex
	live []*attemptCtx
	t    *time.Timer
	at   time.Time // when t fires; zero if not armed
}

func (w *watch) begin(e *exec, n *graph.Node, gen, attempt int) *attemptCtx {
	cctx, cancel := context.WithCancelCause(e.ctx)
	a := &attemptCtx{Context: cctx, cancel: cancel, deadline: time.Now().Add(n.Timeout), node: n, gen: gen, attempt: attempt}
	w.mu.Lock()
	a.slot = len(w.live)
	w.live = append(w.live, a)
	if w.at.IsZero() || a.deadline.Before(w.at) {
		w.arm(e, a.deadline)
	}
	w.mu.Unlock()
	return a
}

// end removes a returned attempt; it reports whether its deadline had passed.
func (w *watch) end(a *attemptCtx) bool {
	w.mu.Lock()
	last := w.live[len(w.live)-1]
	w.live[a.slot], last.slot = last, a.slot
	w.live[len(w.live)-1] = nil
	w.live = w.live[:len(w.live)-1]
	expired := a.expired
	w.mu.Unlock()
	a.cancel(nil)
	return expired
}

// arm sets the timer for at; w.mu is held.
func (w *watch) arm(e *exec, at time.Time) {
	w.at = at
	if w.t == nil {
		w.t = time.AfterFunc(time.Until(at), func() { w.fire(e) })
		return
	}
	w.t.Reset(time.Until(at))
}

func (w *watch) fire(e *exec) {
	var abandoned []completion
	w.mu.Lock()
	w.at = time.Time{}
	if e.ctx.Err() == nil { // else the run itself ended: the coordinator handles it
		now := time.Now()
		var next time.Time
		for _, a := range w.live {
			if a.abandoned {
				continue
			}
			due := a.deadline
			if !a.expired && !now.Before(due) {
				a.expired = true
				a.cancel(context.DeadlineExceeded)
			}
			if a.expired {
				due = a.deadline.Add(e.r.grace)
				if !now.Before(due) {
					a.abandoned = true
					abandoned = append(abandoned, completion{idx: a.node.Index, gen: a.gen, attempts: a.attempt,
						err: &TimeoutError{Node: a.node.Name, After: a.node.Timeout, Abandoned: true}})
					continue
				}
			}
			if next.IsZero() || due.Before(next) {
				next = due
			}
		}
		if !next.IsZero() {
			w.arm(e, next)
		}
	}
	w.mu.Unlock()
	for _, c := range abandoned {
		e.deliver(c, false)
	}
}

func (w *watch) stop() {
	w.mu.Lock()
	if w.t != nil {
		w.t.Stop()
	}
	w.mu.Unlock()
}
