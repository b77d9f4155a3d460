package run

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
)

// runCtx is a run's context: the caller's, stopped with a cause (fail
// fast, pause, kill, cancel, deadline) and carrying the run's deadline. It
// has no timer of its own: the Runner's keeper stops the run at the
// deadline. Like an attempt's, the cancelable context behind it is made
// only when something waits on it, derives a context from it or looks up
// a value through it; until then it is a few words of the run's shared
// part, and stopping it takes no lock.
type runCtx struct {
	parent   context.Context          // the caller's
	deadline int64                    // mono
	stopped  atomic.Pointer[error]    // why it was stopped, first cause only
	inner    atomic.Pointer[innerCtx] // nil until needed
}

func (c *runCtx) Deadline() (time.Time, bool) { return monoTime(c.deadline), true }

func (c *runCtx) Done() <-chan struct{} { return c.materialize().ctx.Done() }

func (c *runCtx) Value(key any) any { return c.materialize().ctx.Value(key) }

// Err reports DeadlineExceeded once the run's deadline ended it, as a
// context.WithTimeout would; Canceled once it was stopped otherwise, and
// the caller's error once the caller's context ended.
func (c *runCtx) Err() error {
	if p := c.stopped.Load(); p != nil {
		if *p == errDeadline {
			return context.DeadlineExceeded
		}
		return context.Canceled
	}
	return c.parent.Err()
}

// cause is why the run's context ended (nil while it has not).
func (c *runCtx) cause() error {
	if p := c.stopped.Load(); p != nil {
		return *p
	}
	if c.parent.Err() != nil {
		return context.Cause(c.parent)
	}
	return nil
}

// stop ends the context with cause, unless it ended already.
func (c *runCtx) stop(cause error) {
	if !c.stopped.CompareAndSwap(nil, causeRef(cause)) {
		return
	}
	if in := c.inner.Load(); in != nil {
		in.cancel(cause)
	}
}

// causeRef points at cause: the scheduler's own causes at their
// variables, so that stopping a run allocates nothing.
func causeRef(cause error) *error {
	switch cause {
	case nil, context.Canceled:
		return &canceled
	case errDeadline:
		return &errDeadline
	case errFailed:
		return &errFailed
	case errPaused:
		return &errPaused
	case errKilled:
		return &errKilled
	}
	p := new(error) // not &cause: that would move cause to the heap on every call
	*p = cause
	return p
}

var canceled = context.Canceled

// materialize returns the cancelable context behind c, making it on first
// use: a child of the caller's, cancelled at once if c was stopped. (It is
// published before the cause is read, and stop sets the cause before it
// looks for it: one of the two sees the other.)
func (c *runCtx) materialize() *innerCtx {
	in, made := makeInner(&c.inner, c.parent)
	if p := c.stopped.Load(); made && p != nil {
		in.cancel(*p)
	}
	return in
}

// makeInner returns the context published in p, first publishing a
// cancelable child of parent there if there is none; made says this call
// published it (a goroutine that loses the race detaches its own).
func makeInner(p *atomic.Pointer[innerCtx], parent context.Context) (in *innerCtx, made bool) {
	if in := p.Load(); in != nil {
		return in, false
	}
	ctx, cancel := context.WithCancelCause(parent)
	in = &innerCtx{ctx: ctx, cancel: cancel}
	if !p.CompareAndSwap(nil, in) {
		cancel(context.Canceled)
		return p.Load(), false
	}
	return in, true
}

// release lets go of the caller's context: the run is over.
func (c *runCtx) release() {
	c.stop(context.Canceled)
	if in := c.inner.Load(); in != nil {
		in.cancel(context.Canceled) // no-op if stop cancelled it; detaches it from the caller's
	}
}

// attemptCtx is one attempt's context: the run's, with the node's deadline.
// With it comes the kernel.Scope the agent reaches through it, so an agent
// that keeps its context keeps what it needs and nothing a later run
// reuses. A node's first attempt's comes with the run's (exec.firsts).
// The cancelable context behind Done is made the first time an agent asks
// for it (most no-op and pure-compute agents never do), and the Runner's
// keeper enforces the deadline, so an attempt has no timer of its own. It
// takes no lock unless an agent waits on it.
type attemptCtx struct {
	scope kernel.Scope // what the agent reaches through its context, made with it
	sh    *shared      // the run's; its ctx is the parent of this one
	node  *graph.Node
	due   int64 // the deadline, mono

	inner   atomic.Pointer[innerCtx] // nil until Done or a derived context needs it
	state   atomic.Uint32            // attemptExpired, attemptEnded, attemptAbandoned
	gen     int32
	attempt int32
}

const (
	attemptExpired   = 1 << iota // the deadline cut the attempt off
	attemptEnded                 // the agent returned
	attemptAbandoned             // it ignored the cut too long: the run went on without it
)

func (c *attemptCtx) expired() bool   { return c.state.Load()&attemptExpired != 0 }
func (c *attemptCtx) ended() bool     { return c.state.Load()&attemptEnded != 0 }
func (c *attemptCtx) abandoned() bool { return c.state.Load()&attemptAbandoned != 0 }

type innerCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (c *attemptCtx) Deadline() (time.Time, bool) { return monoTime(c.due), true }

func (c *attemptCtx) Done() <-chan struct{} { return c.materialize().ctx.Done() }

// Err reports DeadlineExceeded once the node's deadline cut the attempt off,
// Canceled once the agent returned, and the run's error once the run ended.
func (c *attemptCtx) Err() error {
	if c.expired() {
		return context.DeadlineExceeded
	}
	if in := c.inner.Load(); in != nil {
		return in.ctx.Err()
	}
	if c.ended() {
		return context.Canceled
	}
	return c.sh.ctx.Err()
}

func (c *attemptCtx) Value(key any) any {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Value(key)
	}
	return c.sh.ctx.Value(key)
}

// materialize returns the cancelable context behind the attempt, making it
// on first use: a child of the run's, cancelled at once if the attempt was
// cut off or has returned. (It is published before the flags are read, and
// expire and release set their flag before they look for it: one of the
// two sees the other.)
func (c *attemptCtx) materialize() *innerCtx {
	in, made := makeInner(&c.inner, c.sh.ctx)
	switch {
	case !made:
	case c.expired():
		in.cancel(context.DeadlineExceeded)
	case c.ended():
		in.cancel(context.Canceled)
	}
	return in
}

// expire cuts the attempt off at its deadline.
func (c *attemptCtx) expire() {
	c.state.Or(attemptExpired)
	in := c.inner.Load()
	if in == nil {
		in = c.materialize() // so that context.Cause sees why
	}
	in.cancel(context.DeadlineExceeded)
}

// release ends the attempt: a context made for it is cancelled, which
// detaches it from the run's.
func (c *attemptCtx) release() {
	c.state.Or(attemptEnded)
	if in := c.inner.Load(); in != nil {
		in.cancel(context.Canceled)
	}
}

// epoch anchors mono, the scheduler's clock.
var epoch = time.Now()

// mono is nanoseconds since epoch on the monotonic clock: cheaper to read
// than time.Now, which also reads the wall clock.
func mono() int64 { return int64(time.Since(epoch)) }

// monoTime is the time.Time of mono reading m.
func monoTime(m int64) time.Time { return epoch.Add(time.Duration(m)) }

// keeper enforces the deadlines of a Runner's runs with one timer, armed
// for the earliest thing any run's watch waits for. A run costs it no timer
// of its own: a run starts later than the runs in flight, so its deadlines
// come later too, and the timer is rarely moved.
type keeper struct {
	r  *Runner
	mu sync.Mutex
	t  *time.Timer
	at atomic.Int64 // mono when t fires; 0 while it is not armed; set under mu
}

// lower makes the keeper fire at or before at. A run in flight calls it
// after it entered its Runner: if the keeper fires meanwhile, it sees the
// run.
func (k *keeper) lower(at int64) {
	if cur := k.at.Load(); cur != 0 && at >= cur {
		return // armed for no later (the usual case: runs start in order)
	}
	k.mu.Lock()
	if cur := k.at.Load(); cur == 0 || at < cur {
		k.arm(at)
	}
	k.mu.Unlock()
}

// arm sets the timer for at; k.mu is held.
func (k *keeper) arm(at int64) {
	k.at.Store(at)
	d := time.Duration(at - mono())
	if k.t == nil {
		k.t = time.AfterFunc(d, k.fire)
		return
	}
	k.t.Reset(d)
}

func (k *keeper) fire() {
	k.mu.Lock()
	k.at.Store(0) // a run lowering it meanwhile arms it
	k.mu.Unlock()
	k.r.mu.Lock()
	runs := make([]*exec, 0, k.r.nactive)
	for e := k.r.active; e != nil; e = e.next {
		runs = append(runs, e)
	}
	k.r.scanning++
	k.r.mu.Unlock()
	var next int64
	for _, e := range runs {
		if at := e.watch.check(e); at != 0 && (next == 0 || at < next) {
			next = at
		}
	}
	k.r.mu.Lock()
	k.r.scanning--
	k.r.mu.Unlock()
	if next != 0 {
		k.lower(next)
	}
}

// watch holds what a run waits for in time: its deadline, and the
// deadlines of its attempts. At the run's deadline the run is stopped; at
// its deadline an attempt is cancelled, and if the agent has not returned a
// grace period later the coordinator is told it was abandoned. The
// Runner's keeper calls check when something may be due.
//
// Every attempt starts after the run, and no node's timeout is shorter than
// minTimeout, so no attempt is due before the run's start + minTimeout:
// starting an attempt never moves the keeper's timer, and takes no lock.
type watch struct {
	mu       sync.Mutex
	started  int64 // the run's start, mono
	deadline int64 // the run's, mono
	// minTimeout is the shortest node timeout of the graph.
	minTimeout int64
	at         int64 // when to look again, mono; 0 before start and after the end
}

// start sets w up for e's run, before the run is in flight (so without
// w's lock), and returns when the keeper must look at it next: when its
// first attempt could be due, at the latest.
func (w *watch) start(e *exec, now int64) (at int64) {
	w.started = now
	w.deadline = e.rc.deadline
	w.minTimeout = int64(e.g.MinTimeout)
	if w.minTimeout <= 0 { // a graph not made by graph.Compile
		w.minTimeout = int64(time.Hour)
		for _, n := range e.g.Nodes {
			w.minTimeout = min(w.minTimeout, int64(n.Timeout))
		}
	}
	w.at = min(w.deadline, now+w.minTimeout)
	return w.at
}

// begin makes the context of an attempt at node n on in, with its kernel
// call, and publishes it for the keeper. clean says in is made of kernel
// outputs as they are.
func (w *watch) begin(e *exec, n *graph.Node, gen, attempt int, now int64, in agent.Message, clean bool) (*attemptCtx, *kernel.Call) {
	var a *attemptCtx
	var c *kernel.Call
	if i := n.Index; gen == 1 && attempt == 1 {
		// A node's first attempt in a run is made once: its context comes
		// with the run's (exec.firsts), and its kernel call is kept with
		// the node's state, which later runs reuse: nothing holds a call
		// once it returned, but a toolset, which holds its call. Any later
		// attempt gets a context and a call of its own, so that what an
		// earlier one left running never sees a later one's.
		a = &e.firsts[i/firstsChunk][i%firstsChunk]
		if len(n.Tools) == 0 {
			c = &e.states[i].call
		}
	} else {
		a = new(attemptCtx)
	}
	if c == nil {
		c = new(kernel.Call)
	}
	*c = kernel.Call{Run: e.kr, Node: n, Input: in, Attempt: attempt, InputRedacted: clean, Scope: &a.scope}
	a.sh, a.node, a.due, a.gen, a.attempt = e.sh, n, now+int64(n.Timeout), int32(gen), int32(attempt)
	e.states[n.Index].attempt.Store(a)
	return a, c
}

// end removes a returned attempt; it reports whether its deadline had passed.
func (w *watch) end(e *exec, a *attemptCtx) bool {
	e.states[a.node.Index].attempt.CompareAndSwap(a, nil)
	a.release()
	return a.expired()
}

// check acts on what is due and returns when to look again (0: never).
func (w *watch) check(e *exec) int64 {
	now := mono()
	w.mu.Lock()
	at, deadline := w.at, w.deadline
	if at == 0 || now < at { // not started or over; or nothing due
		w.mu.Unlock()
		return at
	}
	if now >= deadline {
		w.at = 0
		w.mu.Unlock()
		e.stop(errDeadline) // the coordinator takes it from here
		return 0
	}
	w.mu.Unlock()
	var abandoned []completion
	var expired []*attemptCtx
	next := min(deadline, now+w.minTimeout)
	e.mu.Lock()
	if e.closed || e.rc.Err() != nil { // the coordinator handles the run's end
		e.mu.Unlock()
		w.mu.Lock()
		w.at = 0
		w.mu.Unlock()
		return 0
	}
	for i := range e.states {
		a := e.states[i].attempt.Load()
		if a == nil || a.abandoned() {
			continue
		}
		due := a.due
		if !a.expired() && now >= due {
			a.state.Or(attemptExpired)
			expired = append(expired, a)
		}
		if a.expired() {
			due += int64(e.r.grace)
			if now >= due {
				a.state.Or(attemptAbandoned)
				e.abandoned = true
				n := a.node
				abandoned = append(abandoned, completion{idx: n.Index, gen: int(a.gen), attempts: int(a.attempt),
					err: &TimeoutError{Node: n.Name, After: n.Timeout, Abandoned: true},
					dur: time.Duration(now - (a.due - int64(n.Timeout)))}) // since the attempt began
				continue
			}
		}
		next = min(next, due)
	}
	e.mu.Unlock()
	w.mu.Lock()
	w.at = next
	w.mu.Unlock()
	for _, a := range expired {
		a.expire()
	}
	for _, c := range abandoned {
		if _, _, wake := e.deliver(c, false); wake != nil {
			wakeUp(wake)
		}
	}
	return next
}
