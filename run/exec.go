package run

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
)

type nodeState struct {
	status   NodeStatus
	okUp     int
	doneUp   int
	gen      int
	attempts int
	iter     int
	clean    bool // in is a kernel call's output as is
	resumed  bool // out comes from a checkpoint, redacted by another process perhaps
	dur      time.Duration
	in       agent.Message // while the node waits in the queue
	out      agent.Message
	attempt  atomic.Pointer[attemptCtx] // in flight under the node's timeout
	call     kernel.Call                // the node's first attempt's, in this run
	err      error
	warnings []string
	route    string
}

type completion struct {
	idx, gen int
	out      agent.Message
	err      error
	attempts int
	warnings []string
	dur      time.Duration
	ended    int64 // mono, when the node's goroutine was done with it
}

// exec is one run in progress. Its state is guarded by mu: a node's
// goroutine applies the node's completion itself and goes straight on with
// one successor that became ready (a chain runs on one goroutine), while
// the caller's goroutine only waits for the run to go idle, its deadline or
// its cancellation. Once the run has reported, e is reused by a later run
// (execs); what may outlive the run is in sh.
type exec struct {
	sh *shared // what outlives the run

	r          *Runner
	prev, next *exec // in r's runs in flight, under r.mu
	g          *graph.Graph
	kr         *kernel.Run
	onEvent    func(Event)
	watch      watch // the run's deadline and its attempts' timeouts

	mu     sync.Mutex
	states []nodeState
	// firsts holds the contexts of the nodes' first attempts, in chunks
	// small enough to stay off the large-object path of the allocator.
	firsts    [][]attemptCtx
	firstsBuf [1][]attemptCtx
	ready     []int32 // nodes started under mu, waiting for a goroutine, from head on
	head      int
	helping   bool          // a helper is on its way for the nodes in ready
	wake      chan struct{} // signalled when nothing is running, and when the run is stopped
	scratch   *scratch      // states, ready and wake, reused by a later run
	closed    bool          // the run has reported: late completions are dropped
	// abandoned: a node was left running when it ignored its context; it
	// may still touch states, so they are not reused.
	abandoned bool
	// left: the run left its Runner while the keeper was not looking
	// through the runs (so it holds no pointer to e).
	left      bool
	rc        *runCtx // the run's context (sh.rcv): its cancellation and deadline; sh.ctx for the nodes
	running   int
	resume    map[string]agent.Message
	approvals []string
	// outcome so far
	status  Status
	failErr error
}

// shared is what a run's kernel calls and its agents' contexts point to,
// which may outlive the run (an agent may keep its context after its call
// returns, and ask it for its call's details): one allocation per run.
// The rest of exec is reused by later runs (execs).
type shared struct {
	krv    kernel.Run    // kr, unless the run is resumed
	budget kernel.Budget // kr's, for a root run
	rcv    runCtx
	ctx    context.Context   // rcv, as the tracer may have wrapped it for the nodes
	id     [2 * idBytes]byte // krv.ID's bytes, when the run made its own
}

// execs holds finished runs' execs for reuse. A run that abandoned a node,
// or whose helper may still be on its way, or that the Runner's keeper
// may still be looking at, is not put back: something may still touch it.
var execs sync.Pool

func newExec() *exec {
	if e, ok := execs.Get().(*exec); ok {
		return e
	}
	return new(exec)
}

// recycle puts e back into execs if nothing can touch it any more; the
// run has reported and left its Runner.
func (e *exec) recycle() {
	e.mu.Lock()
	ok := !e.abandoned && !e.helping && e.left
	e.mu.Unlock()
	if ok {
		*e = exec{}
		execs.Put(e)
	}
}

// firstsChunk is how many first-attempt contexts share an allocation.
const firstsChunk = 64

// launch is a node to run on some goroutine.
type launch struct {
	i, gen int
	in     agent.Message
	clean  bool // in is a kernel call's output as is
}

// init readies e to run g; kr is e's own krv or a run resumed.
func (e *exec) init(r *Runner, g *graph.Graph, kr *kernel.Run, onEvent func(Event)) {
	e.r, e.g, e.kr, e.onEvent = r, g, kr, onEvent
	e.scratch = getScratch(len(g.Nodes))
	e.states, e.ready, e.wake = e.scratch.states, e.scratch.ready, e.scratch.wake
	if chunks := (len(g.Nodes) + firstsChunk - 1) / firstsChunk; chunks <= len(e.firstsBuf) {
		e.firsts = e.firstsBuf[:0]
	} else {
		e.firsts = make([][]attemptCtx, 0, chunks)
	}
	for i := 0; i < len(g.Nodes); i += firstsChunk {
		e.firsts = append(e.firsts, make([]attemptCtx, min(firstsChunk, len(g.Nodes)-i)))
	}
	for i := range e.states {
		e.states[i].status = NodePending
	}
}

// scratch is the per-node state of a run, reused by later runs of graphs of
// about the same size: a run's states and ready queue are a good share of
// what it allocates, and all of it for the garbage collector to scan.
// Nothing outside the scheduler points into it (an agent's context is an
// attemptCtx, never reused), so once every node of a run has returned it
// is free. A run that abandoned a node does not give it back.
type scratch struct {
	states []nodeState
	ready  []int32
	// wake may carry a stale signal from the run before: whoever waits on
	// it looks again at what it waits for.
	wake chan struct{}
}

// scratchPools hold scratch by size class: pool k has room for 1<<k nodes.
var scratchPools [11]sync.Pool

// sizeClass is the pool for room for n nodes (none if it is past the last).
func sizeClass(n int) int { return bits.Len(uint(max(n, 4) - 1)) }

func getScratch(n int) *scratch {
	size := n
	if k := sizeClass(n); k < len(scratchPools) {
		if s, ok := scratchPools[k].Get().(*scratch); ok {
			s.states = s.states[:n]
			return s
		}
		size = 1 << k
	}
	return &scratch{states: make([]nodeState, n, size), ready: make([]int32, 0, size), wake: make(chan struct{}, 1)}
}

// release gives e's scratch back unless a node may still touch it. mu is
// held and the run has reported.
func (e *exec) release() {
	s := e.scratch
	e.scratch = nil
	if s == nil || e.abandoned {
		// An abandoned node's goroutine still reads states when its agent
		// returns (watch.end): they stay as they are.
		return
	}
	e.states, e.ready, e.head = nil, nil, 0
	k := sizeClass(cap(s.states))
	if k >= len(scratchPools) {
		return // made for a graph too big to pool
	}
	clear(s.states) // holds the run's messages
	s.ready = s.ready[:0]
	scratchPools[k].Put(s)
}

func (e *exec) emit(typ string, node string, f func(*Event)) {
	if e.onEvent == nil {
		return
	}
	ev := Event{Type: typ, RunID: e.kr.ID, Graph: e.g.Name, Node: node, Time: time.Now()}
	if f != nil {
		f(&ev)
	}
	e.onEvent(ev)
}

func (e *exec) run(parent context.Context, deadline time.Duration, input agent.Message) *Result {
	start := time.Now()
	res := &Result{RunID: e.kr.ID, Graph: e.g.Name, Principal: e.kr.Principal, StartedAt: start}
	dl := start.Add(deadline)
	if pd, ok := parent.Deadline(); ok && pd.Before(dl) {
		dl = pd
	}
	e.rc = &e.sh.rcv
	e.rc.parent, e.rc.deadline = parent, int64(dl.Sub(epoch))
	defer e.rc.release()
	at := e.watch.start(e, int64(start.Sub(epoch)))
	e.r.enter(e)
	e.r.keeper.lower(at) // once the keeper can see the run
	defer e.r.leave(e)
	e.kr.Hold(input.Labels)
	var endSpan func(string)
	e.sh.ctx, endSpan = e.r.k.StartRun(e.rc, e.kr)
	defer func() { endSpan(string(e.status)) }()
	e.mu.Lock()
	e.status = StatusRunning
	e.emit(EventRunStarted, "", nil)
	if err := input.Validate(); err != nil {
		e.status, e.failErr = StatusFailed, fmt.Errorf("input: %w", err)
	} else {
		for _, i := range e.g.Roots {
			e.start(i, input, false)
		}
	}
	_, _, help, _ := e.launch(false)
	busy := e.running > 0
	e.mu.Unlock()
	if help {
		workers.run(e) // last before waiting: the helper gets the processor sooner
	}

	pdone := parent.Done()
	for busy {
		if pdone == nil { // a caller's context that is never done: no select
			<-e.wake
		} else {
			select {
			case <-e.wake:
			case <-pdone:
				pdone = nil
				e.stop(context.Cause(parent)) // rc's Err saw it already; this records the cause
			}
		}
		if e.rc.Err() != nil {
			e.interrupt()
		}
		e.mu.Lock()
		busy = e.running > 0
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.status == StatusRunning && e.rc.Err() != nil {
		e.mu.Unlock()
		e.interrupt() // ended before any node could start
		e.mu.Lock()
	}
	e.closed = true
	e.finish(res)
	e.release()
	res.FinishedAt = start.Add(time.Since(start)) // the monotonic clock alone
	e.emit(EventRunFinished, "", func(ev *Event) {
		ev.Status = string(res.Status)
		ev.Error = res.Error
		ev.DurationMS = ms(res.FinishedAt.Sub(start))
	})
	return res
}

// launch hands out the nodes made ready under mu: with inline, the first
// to the calling goroutine, which runs it next. If more wait and no helper
// is on its way, it reports help: the caller then calls one from the worker
// pool, once mu is released. A helper takes one node and calls the next
// helper if more still wait. So a fan-out of fast nodes is drained by a few
// goroutines instead of one each, while a node that blocks holds up
// nothing: every node taken off the queue with more behind it calls a
// helper for them. idle reports that nothing runs or waits. mu is held.
func (e *exec) launch(inline bool) (first launch, keep, help, idle bool) {
	keep = inline && e.head < len(e.ready)
	if keep {
		i := e.ready[e.head]
		st := &e.states[i]
		first = launch{i: int(i), gen: st.gen, in: st.in, clean: st.clean}
		st.in = agent.Message{}
		if e.head++; e.head == len(e.ready) {
			e.ready, e.head = e.ready[:0], 0
		}
	}
	if e.head < len(e.ready) && !e.helping {
		e.helping = true
		help = true
	}
	return first, keep, help, e.running == 0
}

// help runs on a worker from the pool: it takes a waiting node, if one is
// left, and goes on down the queue. If it left the run idle, it returns
// the channel to wake the run's caller with: its caller sends on it as the
// last thing before it parks, without touching e again (which, once the
// caller is done, may be another run's).
func (e *exec) help() (wake chan struct{}) {
	e.mu.Lock()
	e.helping = false
	var l launch
	ok, help, idle := false, false, false
	if !e.closed {
		l, ok, help, idle = e.launch(true)
	}
	if idle {
		wake = e.wake
	}
	e.mu.Unlock()
	if help {
		workers.run(e)
	}
	if ok {
		return e.nodeGoroutine(l)
	}
	return wake
}

// wakeUp wakes the caller waiting on wake, if it is not already awake.
func wakeUp(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// signal wakes the run's caller, if it is not already awake.
func (e *exec) signal() { wakeUp(e.wake) }

// stop cancels the run's context with cause and wakes its caller.
func (e *exec) stop(cause error) {
	e.rc.stop(cause)
	e.signal()
}

// deliver applies a node's completion and starts what became ready; with
// inline, it hands the calling goroutine one ready node to run next.
// If that left the run idle (nothing running, nothing to run), it returns
// the channel to wake the run's caller with (see help).
func (e *exec) deliver(c completion, inline bool) (next launch, ok bool, wake chan struct{}) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return launch{}, false, nil
	}
	e.complete(c)
	next, ok, help, idle := e.launch(inline)
	if idle {
		wake = e.wake
	}
	e.mu.Unlock()
	if help {
		workers.run(e)
	}
	return next, ok, wake
}

// interrupt handles the run's context ending: deadline, cancel, fail-fast
// or pause. In-flight nodes are cancelled and given a grace period.
func (e *exec) interrupt() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle()
	grace := time.NewTimer(e.r.grace)
	defer grace.Stop()
	for e.running > 0 {
		e.mu.Unlock()
		select {
		case <-e.wake:
			e.mu.Lock()
		case <-grace.C:
			e.mu.Lock()
			for i := range e.states {
				if e.states[i].status == NodeRunning {
					e.states[i].status = NodeCancelled
					e.states[i].dur = time.Duration(mono() - e.watch.started)
					e.states[i].err = errors.New("abandoned: did not stop when cancelled")
				}
			}
			e.running = 0
			e.closed = true // what the abandoned nodes report later is dropped
			e.abandoned = true
		}
	}
}

// settle sets the run's status from why its context ended; mu is held.
func (e *exec) settle() {
	if e.status != StatusRunning {
		return
	}
	switch cause := e.rc.cause(); {
	case errors.Is(cause, errDeadline):
		e.status, e.failErr = StatusLimitExceeded, &kernel.LimitError{Limit: "run deadline"}
	case errors.Is(cause, errFailed), errors.Is(cause, errPaused):
	case errors.Is(cause, errKilled):
		e.status, e.failErr = StatusCancelled, errKilled
	default:
		e.status, e.failErr = StatusCancelled, errors.New("run cancelled")
	}
}

// start starts node i on in; clean says in is a kernel call's output as is,
// already redacted.
func (e *exec) start(i int, in agent.Message, clean bool) {
	st := &e.states[i]
	if e.rc.Err() != nil {
		st.status = NodeCancelled
		return
	}
	if out, ok := e.resume[e.g.Nodes[i].Name]; ok {
		// Succeeded in an earlier attempt of this run: not run again.
		delete(e.resume, e.g.Nodes[i].Name)
		st.resumed = true
		e.kr.Hold(out.Labels)
		st.status = NodeRunning
		st.gen++
		e.running++
		e.complete(completion{idx: i, gen: st.gen, out: out})
		st.warnings = append(st.warnings, "resumed from checkpoint")
		return
	}
	st.status = NodeRunning
	st.gen++
	e.running++
	if e.onEvent != nil {
		e.emit(EventNodeStarted, e.g.Nodes[i].Name, nil)
	}
	st.in, st.clean = in, clean
	e.ready = append(e.ready, int32(i))
}

// nodeGoroutine runs a node, then whichever successor it made ready, and so
// on down the chain. If it left the run idle, it returns the channel to
// wake the run's caller with (see help).
func (e *exec) nodeGoroutine(l launch) (wake chan struct{}) {
	var now int64 // the clock when the last node ended, 0 before the first
	for {
		c := e.runNode(l, now)
		now = c.ended
		next, ok, wake := e.deliver(c, true)
		if !ok {
			return wake
		}
		l = next
	}
}

// runNode executes one node: attempts, retries with backoff, its gate, and
// returns how it ended. now is the clock when the goroutine's last node
// ended, or 0.
func (e *exec) runNode(l launch, now int64) (c completion) {
	n := e.g.Nodes[l.i]
	c = completion{idx: l.i, gen: l.gen}
	if !e.r.sem.tryAcquire() {
		now = 0 // waited for a slot, maybe
		if !e.r.sem.acquire(e.rc) {
			c.err = e.rc.cause()
			return
		}
	}
	if n.Sem != nil {
		now = 0
		select {
		case n.Sem <- struct{}{}:
		case <-e.rc.Done():
			e.r.sem.release()
			c.err = e.rc.cause()
			return
		}
	}
	// The node's time, and its first attempt's deadline, count from here:
	// waiting for a concurrency slot is not the node's. A node that had
	// not to wait, run by the goroutine that just ran another, starts at
	// the other's end: the clock is read once a node, and the scheduling
	// between the two (well under a microsecond) is counted to this one.
	began := now
	if began == 0 {
		began = mono()
	}
	e.attempts(n, l, began, &c)
	c.ended = mono()
	c.dur = time.Duration(c.ended - began)
	if n.Sem != nil {
		<-n.Sem
	}
	e.r.sem.release()
	return c
}

// attempts makes node n's attempts, from began, and its gate's checks,
// until one is good or none is left; it records how they went in c.
func (e *exec) attempts(n *graph.Node, l launch, began int64, c *completion) {
	gen, in := l.gen, l.in
	gateTries := 0
	for attempt := 1; ; attempt++ {
		c.attempts = attempt
		now := began
		if attempt > 1 || gateTries > 0 {
			now = mono()
		}
		out, err := e.attempt(n, gen, in, l.clean, attempt, now)
		if err == nil && n.Gate != nil {
			if ok, why := n.Gate.Check.Eval(out); !ok {
				switch n.Gate.OnFail {
				case graph.GateWarn:
					c.warnings = append(c.warnings, "gate: "+why)
				case graph.GateRetry:
					if gateTries < n.Gate.Retries {
						gateTries++
						c.warnings = append(c.warnings, fmt.Sprintf("gate retry %d: %s", gateTries, why))
						continue
					}
					err = &GateError{Node: n.Name, Reason: why}
				default:
					err = &GateError{Node: n.Name, Reason: why}
				}
			}
		}
		if err == nil {
			c.out = out
			return
		}
		if attempt > n.Retries || kernel.Permanent(err) || !retryable(err) || e.rc.Err() != nil {
			c.err = err
			return
		}
		backoff := n.Backoff << (attempt - 1)
		if backoff > 30*time.Second || backoff <= 0 {
			backoff = 30 * time.Second
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-e.rc.Done():
			t.Stop()
			c.err = err
			return
		}
	}
}

// GateError says a node's output failed its quality gate.
type GateError struct {
	Node   string
	Reason string
}

func (e *GateError) Error() string { return fmt.Sprintf("node %s: gate failed: %s", e.Node, e.Reason) }

// retryable: for a node marked retryable, any error but malformed input, a
// gate failure, or one whose chain says trying again cannot help (a peer's
// 4xx, a refused effect).
func retryable(err error) bool {
	var in *agent.InputError
	var ge *GateError
	var r interface{ Retryable() bool }
	switch {
	case errors.As(err, &in), errors.As(err, &ge):
		return false
	case errors.As(err, &r):
		return r.Retryable()
	}
	return true
}

// attempt makes one kernel call under the node's timeout. If the agent
// ignores its context past the timeout, a watchdog reports the node timed
// out to the coordinator, which moves on without it.
func (e *exec) attempt(n *graph.Node, gen int, in agent.Message, clean bool, attempt int, now int64) (agent.Message, error) {
	if e.watch.deadline-now <= int64(n.Timeout) {
		// The run's deadline comes first, and the coordinator enforces it.
		return e.r.k.Invoke(e.sh.ctx, &kernel.Call{Run: e.kr, Node: n, Input: in, InputRedacted: clean, Attempt: attempt})
	}
	actx, call := e.watch.begin(e, n, gen, attempt, now, in, clean)
	out, err := e.r.k.Invoke(actx, call)
	if expired := e.watch.end(e, actx); err != nil && expired && e.rc.Err() == nil {
		err = &TimeoutError{Node: n.Name, After: n.Timeout}
	}
	return out, err
}

// TimeoutError says a node ran past its timeout.
type TimeoutError struct {
	Node      string
	After     time.Duration
	Abandoned bool
}

func (e *TimeoutError) Error() string {
	if e.Abandoned {
		return fmt.Sprintf("node %s: timed out after %v (ignored cancellation; abandoned)", e.Node, e.After)
	}
	return fmt.Sprintf("node %s: timed out after %v", e.Node, e.After)
}

func (e *exec) complete(c completion) {
	st := &e.states[c.idx]
	if st.status != NodeRunning || c.gen != st.gen {
		return
	}
	e.running--
	st.attempts += c.attempts
	st.dur += c.dur
	st.warnings = append(st.warnings, c.warnings...)
	n := e.g.Nodes[c.idx]
	if c.err != nil {
		e.fail(c.idx, c.err)
		return
	}
	st.status, st.out = NodeSucceeded, c.out
	if e.onEvent != nil {
		e.emit(EventNodeFinished, n.Name, func(ev *Event) {
			ev.Attempt, ev.DurationMS, ev.Status = st.attempts, ms(st.dur), string(NodeSucceeded)
		})
	}
	if n.Loop != nil && e.again(c.idx) {
		return
	}
	var routed []int
	if n.Branch != nil {
		routed, st.route = n.Branch.Route(c.out)
	}
	for _, d := range n.Downstream {
		e.notify(d, n.Branch == nil || slices.Contains(routed, d))
	}
}

// again starts another iteration of the loop whose tail is i, if its bound
// and condition allow; it reports whether it did.
func (e *exec) again(i int) bool {
	n, st := e.g.Nodes[i], &e.states[i]
	if n.Loop.Until != nil {
		if ok, _ := n.Loop.Until.Eval(st.out); ok {
			return false
		}
	}
	if st.iter+1 >= n.Loop.Max {
		if n.Loop.Until != nil {
			st.warnings = append(st.warnings, fmt.Sprintf("loop stopped at its bound of %d iterations before its condition held", n.Loop.Max))
		}
		return false
	}
	st.iter++
	out := st.out
	for _, k := range n.LoopBody {
		ks := &e.states[k]
		ks.status, ks.okUp, ks.doneUp = NodePending, 0, 0
		ks.iter = st.iter
		for _, u := range e.g.Nodes[k].Upstream {
			if !slices.Contains(n.LoopBody, u) {
				ks.doneUp++
				if e.states[u].status == NodeSucceeded {
					ks.okUp++
				}
			}
		}
	}
	e.start(n.Loop.To, out, true)
	return true
}

// fail records node i's failure and decides the run's fate: a failure
// absorbed by tolerant barriers downstream lets the run go on; any other
// stops it (fail fast).
func (e *exec) fail(i int, err error) {
	st := &e.states[i]
	n := e.g.Nodes[i]
	st.err = err
	st.status = NodeFailed
	status := statusOf(err)
	if e.rc.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		// Stopped because the run is ending: the run's cause decides.
		e.settle()
		status = StatusCancelled
	}
	switch status {
	case StatusAwaitingApproval:
		st.status = NodeWaiting
	case StatusDenied:
		st.status = NodeDenied
	case StatusCancelled:
		st.status = NodeCancelled
	}
	e.emit(EventNodeFailed, n.Name, func(ev *Event) {
		ev.Attempt, ev.DurationMS, ev.Error, ev.Status = st.attempts, ms(st.dur), e.redact(err.Error()), string(st.status)
	})
	var pending *kernel.ApprovalPendingError
	if errors.As(err, &pending) {
		e.approvals = append(e.approvals, pending.ApprovalID)
		e.emit(EventApprovalRequested, n.Name, func(ev *Event) { ev.Status, ev.Error = pending.ApprovalID, pending.Reason })
	}
	absorbed := status == StatusFailed && len(n.Downstream) > 0
	for _, d := range n.Downstream {
		if e.g.Nodes[d].Barrier == graph.BarrierAll {
			absorbed = false
		}
	}
	if !absorbed {
		if e.status == StatusRunning {
			e.status, e.failErr = status, err
		}
		cause := errFailed
		if status == StatusAwaitingApproval {
			cause = errPaused
		}
		e.stop(cause)
	}
	for _, d := range n.Downstream {
		e.notify(d, false)
	}
}

func statusOf(err error) Status {
	var d *kernel.DeniedError
	var l *kernel.LimitError
	var a *kernel.ApprovalPendingError
	var policy interface{ Denied() bool }
	switch {
	case errors.As(err, &a):
		return StatusAwaitingApproval
	case errors.As(err, &d), errors.As(err, &policy) && policy.Denied():
		return StatusDenied
	case errors.As(err, &l):
		return StatusLimitExceeded
	case errors.Is(err, errDeadline):
		return StatusLimitExceeded
	case errors.Is(err, context.Canceled), errors.Is(err, errFailed), errors.Is(err, errPaused), errors.Is(err, errKilled):
		// Stopped because the run ended for another reason.
		return StatusCancelled
	}
	return StatusFailed
}

// notify tells node d that one of its upstreams finished (ok: succeeded and
// routed to d) and starts or skips d when its barrier is decided.
func (e *exec) notify(d int, ok bool) {
	st, n := &e.states[d], e.g.Nodes[d]
	if st.status != NodePending {
		return
	}
	st.doneUp++
	if ok {
		st.okUp++
	}
	total := len(n.Upstream)
	var ready, skip bool
	switch n.Barrier {
	case graph.BarrierAll:
		ready, skip = st.okUp == total, st.doneUp > st.okUp
	case graph.BarrierAny:
		ready, skip = st.okUp >= 1, st.doneUp == total && st.okUp == 0
	case graph.BarrierKOfN:
		ready, skip = st.okUp >= n.K, st.okUp+(total-st.doneUp) < n.K
	case graph.BarrierOptional:
		ready = st.doneUp == total
	}
	switch {
	case ready:
		in, clean := e.input(d)
		e.start(d, in, clean)
	case skip:
		st.status = NodeSkipped
		e.emit(EventNodeSkipped, n.Name, nil)
		for _, dd := range n.Downstream {
			e.notify(dd, false)
		}
	}
}

// input builds node d's input: its single upstream's output, or an object
// keyed by the names of the upstreams that succeeded. It reports whether
// the input is clean: made of outputs the kernel redacted, and nothing a
// redaction of the whole would change.
func (e *exec) input(d int) (agent.Message, bool) {
	n := e.g.Nodes[d]
	if len(n.Upstream) == 1 {
		if u := &e.states[n.Upstream[0]]; u.status == NodeSucceeded {
			return u.out, !u.resumed
		}
		return agent.JSON([]byte("{}")), false
	}
	size := 2
	for k, u := range n.Upstream {
		size += len(n.UpstreamName[k]) + 4 + valueSize(e.states[u].out)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	var labels agent.Labels
	clean := n.PlainJoinKeys
	for k, u := range n.Upstream {
		us := &e.states[u]
		if us.status != NodeSucceeded {
			continue
		}
		clean = clean && !us.resumed
		mark := len(buf)
		if mark > 1 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, n.UpstreamName[k])
		buf = append(buf, ':')
		var err error
		if buf, err = agent.AppendValue(buf, us.out); err != nil {
			buf = buf[:mark]
			continue
		}
		labels = labels.Union(us.out.Labels)
	}
	buf = append(buf, '}')
	m := agent.JSON(buf)
	m.Labels = labels
	// Redacted outputs, under keys that are node names and no credential's.
	return m, clean
}

// valueSize is about the size of m's value: exact for data, the least for
// text.
func valueSize(m agent.Message) int {
	n := 0
	for _, p := range m.Parts {
		n += len(p.Data) + len(p.Text) + 3
	}
	return n
}

func (e *exec) redact(s string) string { return e.r.k.Redact(s) }

func (e *exec) finish(res *Result) {
	res.Trace = make([]NodeTrace, len(e.g.Nodes))
	sinks := e.g.Sinks
	if sinks == nil { // a graph not made by graph.Compile
		for i, n := range e.g.Nodes {
			if len(n.Downstream) == 0 {
				sinks = append(sinks, i)
			}
		}
	}
	for i, n := range e.g.Nodes {
		st := &e.states[i]
		status := st.status
		if status == NodePending {
			status = NodeSkipped
			if e.status != StatusSucceeded && e.status != StatusRunning {
				status = NodeCancelled
			}
		}
		t := &res.Trace[i] // filled in place: a NodeTrace is big to copy
		t.Node, t.Status, t.DurationMS, t.Attempts = n.Name, status, ms(st.dur), st.attempts
		if st.warnings != nil {
			t.Warnings = st.warnings
		}
		if st.route != "" {
			t.Route = st.route
		}
		if st.iter > 0 {
			t.Iterations = st.iter + 1
		}
		if st.err != nil {
			t.Error = e.redact(st.err.Error())
		}
		if status == NodeSucceeded && st.out.Labels != 0 {
			t.Labels = st.out.Labels.Names()
		}
	}
	if e.status == StatusRunning {
		e.status = StatusSucceeded
	}
	res.Status = e.status
	if e.failErr != nil {
		res.Error = e.redact(e.failErr.Error())
	}
	res.Labels = e.kr.Labels()
	res.Steps, _ = e.kr.Budget.Used()
	res.Approvals = e.approvals
	if res.Status == StatusAwaitingApproval {
		// Only a paused run is resumed: keep what need not run again.
		res.Checkpoint = map[string]agent.Message{}
		for i, n := range e.g.Nodes {
			if e.states[i].status == NodeSucceeded && n.Loop == nil && len(n.LoopBody) == 0 {
				res.Checkpoint[n.Name] = e.states[i].out
			}
		}
	}
	if res.Status != StatusSucceeded {
		return
	}
	var ok []int
	for _, s := range sinks {
		if e.states[s].status == NodeSucceeded {
			ok = append(ok, s)
		}
	}
	switch len(ok) {
	case 0:
	case 1:
		res.Output = e.states[ok[0]].out
	default:
		buf := []byte{'{'}
		var labels agent.Labels
		for k, s := range ok {
			if k > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, e.g.Nodes[s].Name)
			buf = append(buf, ':')
			if b, err := agent.AppendValue(buf, e.states[s].out); err == nil {
				buf = b
			} else {
				buf = append(buf, "null"...)
			}
			labels = labels.Union(e.states[s].out.Labels)
		}
		res.Output = agent.JSON(append(buf, '}'))
		res.Output.Labels = labels
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// appendJSONString appends s as a JSON string. Node names are restricted to
// [A-Za-z0-9._-], so no escaping is needed beyond the quotes.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
