// Package service is the one run path behind every front door of
// `babel serve`: REST, MCP and A2A start, wait for, read, list, stream and
// cancel runs through a Service, so the kernel's controls, the run limits,
// the concurrency bound, the rate limits and the principal checks apply to
// every door equally.
//
// A Service never calls an agent (runs go through run.Runner, and so
// through kernel.Invoke); never shows one principal another's run (a run
// id of someone else is "not found"); never queues without bound (too many
// runs is "busy", too fast is "rate limited"); and never hands a caller an
// internal error message — callers get a stable code, a safe message and a
// correlation id, and the full error goes to the server log, redacted.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxConcurrentRuns = 256
	DefaultRate              = 50 // runs per second per principal
	DefaultBurst             = 100
	DefaultHistory           = 10_000
	DefaultMaxEvents         = 1_000
	DefaultMaxOutputBytes    = 4 << 20
	DefaultMaxOutputDepth    = 64
	DefaultRunDeadline       = 5 * time.Minute
)

// Observer is told about runs, for metrics. Its methods must not block.
type Observer interface {
	RunStarted(graph string)
	RunFinished(graph string, status run.Status, d time.Duration)
	RunRejected(graph string, code Code)
}

// Redactor removes secret values and credential shapes from text.
type Redactor interface {
	Redact(s string) string
}

// Execution is one run for an Executor to make.
type Execution struct {
	Graph     *graph.Graph
	Input     agent.Message
	Principal string
	RunID     string
	// Deadline lowers the run's deadline (never zero: the server's ceiling
	// or less).
	Deadline time.Duration
	// OnEvent receives the run's events in order; it does not block.
	OnEvent func(run.Event)
	// Resume continues the run RunID, paused for approval, from its
	// checkpoint instead of starting it afresh.
	Resume bool
}

// Executor runs a graph to its end and returns the result; it must honour
// ctx (cancel stops in-flight work) and the deadline. run.Runner behind
// RunnerExecutor is one; the engine (store, audit, approvals) is another.
type Executor interface {
	Execute(ctx context.Context, x *Execution) *run.Result
}

// Canceller is an optional Executor method: called when a caller cancels a
// run that has already returned (paused for approval), so its pending
// approvals are voided.
type Canceller interface {
	Cancel(ctx context.Context, runID string) bool
}

// RunnerExecutor runs graphs with a run.Runner.
type RunnerExecutor struct{ Runner *run.Runner }

func (r RunnerExecutor) Execute(ctx context.Context, x *Execution) *run.Result {
	return r.Runner.Run(ctx, &run.Request{Graph: x.Graph, Input: x.Input, Principal: x.Principal, RunID: x.RunID,
		Deadline: x.Deadline, OnEvent: x.OnEvent})
}

// Options configures a Service. Nil means the defaults.
type Options struct {
	// Executor runs the graphs; nil means a run.Runner over Kernel.
	Executor Executor
	// Kernel runs every node when Executor is nil; nil means kernel.New(nil).
	// Its redactor cleans what the service logs.
	Kernel *kernel.Kernel
	// RunDeadline is the server's ceiling on a run's duration (default 5m,
	// at most run.Ceilings.Deadline). A caller's deadline can only lower it.
	RunDeadline time.Duration
	// MaxSteps is the ceiling on a run's steps when Executor is nil
	// (default run.DefaultLimits.MaxSteps).
	MaxSteps int
	// NodeConcurrency bounds the nodes running at once across all runs when
	// Executor is nil (default: the runner's).
	NodeConcurrency int
	// MaxConcurrentRuns bounds the runs in flight; one more is refused as
	// busy (default 256).
	MaxConcurrentRuns int
	// Rate and Burst bound how fast one principal may start runs (default
	// 50/s, burst 100). A negative Rate means no rate limit.
	Rate  float64
	Burst int
	// History is how many finished runs the default store keeps (10,000).
	History int
	// Store keeps finished runs; nil means a MemoryStore of History runs.
	Store RunStore
	// MaxEvents bounds the events kept per run (1,000; run.finished is
	// always kept).
	MaxEvents int
	// MaxOutputBytes and MaxOutputDepth bound the output a caller is sent
	// (4 MiB, 64 levels); past them the output is replaced by a marker.
	MaxOutputBytes int
	MaxOutputDepth int
	// Authorizer narrows what principals may do; nil lets every principal
	// list and run every served graph (and only ever see its own runs).
	Authorizer Authorizer
	// Logger receives the full (redacted) error of every failed run, keyed
	// by correlation id; nil discards.
	Logger *slog.Logger
	// Redactor cleans what is logged; nil means the kernel's.
	Redactor Redactor
	// Observer is told about runs; nil means nobody.
	Observer Observer
}

// StartRequest is a run to start.
type StartRequest struct {
	// Graph names a served graph.
	Graph string
	// Input is the run's input.
	Input agent.Message
	// Deadline lowers the run's deadline; zero keeps the server's. It is
	// clamped to the server's ceiling.
	Deadline time.Duration
	// Tags are kept with the run (the A2A door keeps its context id here).
	Tags map[string]string
	// ResumeRunID continues that run (paused for approval, now decided)
	// under its own id instead of starting a new one.
	ResumeRunID string
}

// Service runs graphs for principals. It is safe for concurrent use.
type Service struct {
	opts     Options
	exec     Executor
	graphs   map[string]*servedGraph
	names    []string
	store    RunStore
	slots    chan struct{}
	log      *slog.Logger
	redact   func(string) string
	base     context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	limiters sync.Map // principal id -> *rate.Limiter

	mu     sync.Mutex
	active map[string]*liveRun
	closed bool
}

// New returns a Service serving graphs. Graph names must be unique; each
// declared input schema must compile.
func New(graphs []*graph.Graph, opts *Options) (*Service, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.RunDeadline == 0 {
		o.RunDeadline = DefaultRunDeadline
	}
	if o.RunDeadline < 0 || o.RunDeadline > run.Ceilings.Deadline {
		return nil, fmt.Errorf("run deadline %v is outside (0, %v]", o.RunDeadline, run.Ceilings.Deadline)
	}
	if o.MaxConcurrentRuns <= 0 {
		o.MaxConcurrentRuns = DefaultMaxConcurrentRuns
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.MaxEvents < 2 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxOutputDepth <= 0 {
		o.MaxOutputDepth = DefaultMaxOutputDepth
	}
	if o.Kernel == nil {
		o.Kernel = kernel.New(nil)
	}
	exec := o.Executor
	if exec == nil {
		runner, err := run.NewRunner(&run.Config{Kernel: o.Kernel, Concurrency: o.NodeConcurrency,
			Limits: run.Limits{Deadline: o.RunDeadline, MaxSteps: o.MaxSteps}})
		if err != nil {
			return nil, err
		}
		exec = RunnerExecutor{Runner: runner}
	}
	s := &Service{
		opts: o, exec: exec, graphs: map[string]*servedGraph{}, store: o.Store,
		slots: make(chan struct{}, o.MaxConcurrentRuns), log: o.Logger, active: map[string]*liveRun{},
	}
	if s.store == nil {
		s.store = NewMemoryStore(o.History)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.redact = o.Kernel.Redact
	if o.Redactor != nil {
		s.redact = func(v string) string { return o.Redactor.Redact(o.Kernel.Redact(v)) }
	}
	for _, g := range graphs {
		if g == nil {
			return nil, errors.New("nil graph")
		}
		if _, dup := s.graphs[g.Name]; dup {
			return nil, fmt.Errorf("two graphs are named %q: each served graph needs its own name", g.Name)
		}
		sg, err := newServedGraph(g)
		if err != nil {
			return nil, err
		}
		s.graphs[g.Name] = sg
		s.names = append(s.names, g.Name)
	}
	sort.Strings(s.names)
	s.base, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// RunDeadline is the server's ceiling on a run's duration.
func (s *Service) RunDeadline() time.Duration { return s.opts.RunDeadline }

// Graphs lists the graphs p may run, sorted by name.
func (s *Service) Graphs(ctx context.Context, p Principal) ([]GraphInfo, error) {
	out := make([]GraphInfo, 0, len(s.names))
	for _, n := range s.names {
		err := authorize(ctx, s.opts.Authorizer, p, ActionStartRun, n)
		var e *Error
		if errors.As(err, &e) && e.Code == CodeUnauthorized {
			return nil, err
		}
		if err == nil {
			out = append(out, s.graphs[n].info)
		}
	}
	return out, nil
}

// Allowed reports whether p may run the graph named name (and so see it).
func (s *Service) Allowed(ctx context.Context, p Principal, name string) bool {
	_, ok := s.graphs[name]
	return ok && authorize(ctx, s.opts.Authorizer, p, ActionStartRun, name) == nil
}

// GraphNames lists the served graphs' names, sorted; for doors that
// describe themselves before any principal is known (tool lists are
// filtered again at call time).
func (s *Service) GraphNames() []string { return slices.Clone(s.names) }

// Graph describes one served graph.
func (s *Service) Graph(name string) (GraphInfo, bool) {
	sg, ok := s.graphs[name]
	if !ok {
		return GraphInfo{}, false
	}
	return sg.info, true
}

// ClampDeadline turns a caller's deadline in seconds into a duration no
// longer than the server's ceiling. secs must be finite and positive.
func (s *Service) ClampDeadline(secs float64) (time.Duration, error) {
	if math.IsNaN(secs) || math.IsInf(secs, 0) || secs <= 0 {
		return 0, BadRequest(CodeInvalidLimit, "deadline_s must be a finite number of seconds greater than 0")
	}
	if secs >= s.opts.RunDeadline.Seconds() {
		return s.opts.RunDeadline, nil
	}
	d := time.Duration(secs * float64(time.Second))
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d, nil
}

// Start starts a run and returns its id without waiting.
func (s *Service) Start(ctx context.Context, p Principal, req *StartRequest) (string, error) {
	lr, exec, err := s.start(ctx, p, req)
	if err != nil {
		return "", err
	}
	go exec()
	return lr.id, nil
}

// Run starts a run and waits for it. If ctx ends first, the run is
// cancelled (nobody is left to read it) and ctx's error is returned with
// the cancelled run's view.
func (s *Service) Run(ctx context.Context, p Principal, req *StartRequest) (*View, error) {
	lr, exec, err := s.start(ctx, p, req)
	if err != nil {
		return nil, err
	}
	// The caller waits anyway: run on its goroutine rather than a new one.
	stop := context.AfterFunc(ctx, func() { lr.cancel(errCallerGone) })
	exec()
	stop()
	return lr.finalView(), ctx.Err()
}

var (
	errCallerGone      = errors.New("the caller went away")
	errCancelledByUser = errors.New("cancelled by its principal")
	errPanicked        = errors.New("authorizer panicked")
)

// start admits a run and returns it with the function that executes it.
func (s *Service) start(ctx context.Context, p Principal, req *StartRequest) (*liveRun, func(), error) {
	sg, ok := s.graphs[req.Graph]
	if !ok {
		s.reject(req.Graph, CodeNotFound)
		return nil, nil, &Error{Code: CodeNotFound, Status: http.StatusNotFound, Message: fmt.Sprintf("no graph named %q is served here", clip(req.Graph, 100))}
	}
	if err := authorize(ctx, s.opts.Authorizer, p, ActionStartRun, sg.g.Name); err != nil {
		s.reject(req.Graph, CodeForbidden)
		return nil, nil, err
	}
	if req.Deadline < 0 {
		return nil, nil, BadRequest(CodeInvalidLimit, "the deadline must be positive")
	}
	if err := sg.validate(req.Input); err != nil {
		s.reject(req.Graph, CodeInvalidInput)
		return nil, nil, err
	}
	if err := s.allow(p); err != nil {
		s.reject(req.Graph, CodeRateLimited)
		return nil, nil, err
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.reject(req.Graph, CodeBusy)
		return nil, nil, &Error{Code: CodeBusy, Status: http.StatusServiceUnavailable, RetryAfter: time.Second,
			Message: fmt.Sprintf("the server is running its maximum of %d runs; try again shortly", cap(s.slots))}
	}
	deadline := min(req.Deadline, s.opts.RunDeadline)
	id := run.NewID()
	if req.ResumeRunID != "" {
		id = req.ResumeRunID
	}
	lr := &liveRun{id: id, resume: req.ResumeRunID != "", graph: sg.g.Name, principal: p, tags: req.Tags, started: time.Now(),
		done: make(chan struct{}), maxEvents: s.opts.MaxEvents}
	// run.started, a start and an end per node, run.finished: one allocation.
	lr.events = make([]run.Event, 0, min(2+2*len(sg.g.Nodes), s.opts.MaxEvents))
	rctx, cancel := context.WithCancelCause(s.base)
	lr.cancel = cancel

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel(nil)
		<-s.slots
		return nil, nil, ErrShuttingDown
	}
	if _, running := s.active[lr.id]; running {
		s.mu.Unlock()
		cancel(nil)
		<-s.slots
		return nil, nil, &Error{Code: CodeBusy, Status: http.StatusConflict, Message: "the run is already running"}
	}
	s.active[lr.id] = lr
	s.wg.Add(1)
	s.mu.Unlock()
	if s.opts.Observer != nil {
		s.opts.Observer.RunStarted(lr.graph)
	}
	return lr, func() { s.execute(rctx, lr, sg, req.Input, deadline) }, nil
}

// allow applies p's rate limit.
func (s *Service) allow(p Principal) error {
	if s.opts.Rate < 0 {
		return nil
	}
	l, ok := s.limiters.Load(p.ID)
	if !ok {
		l, _ = s.limiters.LoadOrStore(p.ID, rate.NewLimiter(rate.Limit(s.opts.Rate), s.opts.Burst))
	}
	if l.(*rate.Limiter).Allow() {
		return nil
	}
	retry := time.Duration(math.Ceil(1/s.opts.Rate)) * time.Second
	if retry < time.Second {
		retry = time.Second
	}
	return &Error{Code: CodeRateLimited, Status: http.StatusTooManyRequests, RetryAfter: retry,
		Message: fmt.Sprintf("too many runs: at most %g per second (burst %d) for each principal", s.opts.Rate, s.opts.Burst)}
}

func (s *Service) reject(graph string, code Code) {
	if s.opts.Observer != nil {
		s.opts.Observer.RunRejected(graph, code)
	}
}

func (s *Service) execute(ctx context.Context, lr *liveRun, sg *servedGraph, in agent.Message, deadline time.Duration) {
	defer s.wg.Done()
	defer lr.cancel(nil)
	res := s.exec.Execute(ctx, &Execution{Graph: sg.g, Input: in, Principal: lr.principal.ID, RunID: lr.id,
		Deadline: deadline, OnEvent: lr.onEvent, Resume: lr.resume})
	if res.Status == run.StatusSucceeded && ctx.Err() != nil {
		// A run cancelled before its first node started comes back as
		// succeeded with its nodes cancelled: it did not succeed.
		for _, t := range res.Trace {
			if t.Status == run.NodeCancelled {
				res.Status, res.Output = run.StatusCancelled, agent.Message{}
				break
			}
		}
	}
	v := s.finish(lr, res)
	// The scheduler has returned: no event comes after this, so the
	// snapshot can own the slice (subscribers copy what they read).
	lr.mu.Lock()
	events := lr.events
	lr.mu.Unlock()
	snap := &Snapshot{View: v, Events: events}
	if err := s.store.Save(s.base, snap); err != nil {
		s.log.Error("run store: save failed", "run_id", lr.id, "error", s.redact(err.Error()))
	}
	lr.mu.Lock()
	lr.view = v
	lr.mu.Unlock()
	s.mu.Lock()
	delete(s.active, lr.id)
	s.mu.Unlock()
	close(lr.done)
	<-s.slots
	if s.opts.Observer != nil {
		s.opts.Observer.RunFinished(lr.graph, v.Status, res.FinishedAt.Sub(res.StartedAt))
	}
}

// finish renders the caller's view of a finished run and logs what went
// wrong in full.
func (s *Service) finish(lr *liveRun, res *run.Result) *View {
	v := &View{RunID: res.RunID, Graph: res.Graph, Principal: res.Principal, Status: res.Status, Tags: lr.tags,
		StartedAt: res.StartedAt, FinishedAt: res.FinishedAt}
	vj := viewJSON{RunID: v.RunID, Graph: v.Graph, Principal: v.Principal, Status: v.Status, Labels: res.Labels,
		Steps: res.Steps, StartedAt: v.StartedAt, FinishedAt: v.FinishedAt}

	failed := res.Error != ""
	for _, t := range res.Trace {
		failed = failed || t.Error != ""
	}
	if failed {
		v.CorrelationID = lr.correlation()
		attrs := []any{"correlation_id", v.CorrelationID, "run_id", v.RunID, "graph", v.Graph,
			"principal", v.Principal, "status", string(v.Status), "error", s.redact(res.Error)}
		for _, t := range res.Trace {
			if t.Error != "" {
				attrs = append(attrs, slog.Group("node_"+t.Node, "status", string(t.Status), "error", s.redact(t.Error)))
			}
		}
		s.log.Warn("run did not succeed", attrs...)
		vj.Trace = make([]run.NodeTrace, len(res.Trace))
		copy(vj.Trace, res.Trace)
		for i := range vj.Trace {
			if vj.Trace[i].Error != "" {
				vj.Trace[i].Error = safeNodeError(vj.Trace[i].Status)
			}
		}
	} else {
		vj.Trace = res.Trace
	}
	if vj.Trace == nil {
		vj.Trace = []run.NodeTrace{}
	}
	v.Code, v.Message = safeRunError(res)

	out, err := res.Output.Value()
	if err != nil {
		out = nullJSON
	}
	out, code, msg := boundOutput(out, s.opts.MaxOutputBytes, s.opts.MaxOutputDepth)
	if code != "" && v.Code == "" {
		v.Code, v.Message = code, msg
	}
	v.Output = out
	vj.Output, vj.ErrorCode, vj.Error, vj.CorrelationID = out, v.Code, v.Message, v.CorrelationID
	b, err := marshalView(&vj)
	if err != nil {
		// Trace strings and labels always encode; the output was checked. Fall
		// back to a shape without the output rather than fail the run.
		s.log.Error("render run", "run_id", v.RunID, "error", err.Error())
		vj.Output, v.Output = marker(CodeInternal, "the output could not be rendered"), nullJSON
		b, _ = marshalView(&vj)
	}
	v.JSON = b
	return v
}

// lookup finds p's run: live, or finished in the store. A run p may not
// reach (another principal's, unless the Authorizer grants it) is not found.
func (s *Service) lookup(ctx context.Context, p Principal, id string, action string) (*liveRun, *Snapshot, error) {
	if p.ID == "" {
		return nil, nil, &Error{Code: CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"}
	}
	s.mu.Lock()
	lr := s.active[id]
	s.mu.Unlock()
	if lr != nil {
		if err := authorizeRun(ctx, s.opts.Authorizer, p, action, lr.graph, lr.principal.ID); err != nil {
			return nil, nil, err
		}
		return lr, nil, nil
	}
	snap, err := s.store.Get(ctx, id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil, ErrNotFound
		}
		return nil, nil, AsError(err)
	}
	if err := authorizeRun(ctx, s.opts.Authorizer, p, action, snap.View.Graph, snap.View.Principal); err != nil {
		return nil, nil, err
	}
	return nil, snap, nil
}

// Get returns p's run with id.
func (s *Service) Get(ctx context.Context, p Principal, id string) (*View, error) {
	lr, snap, err := s.lookup(ctx, p, id, ActionReadRun)
	if err != nil {
		return nil, err
	}
	if snap != nil {
		return snap.View, nil
	}
	if v := lr.finalView(); v != nil {
		return v, nil
	}
	return runningView(lr, lr.snapshotEvents()), nil
}

// Wait waits for p's run with id to finish, or for ctx to end.
func (s *Service) Wait(ctx context.Context, p Principal, id string) (*View, error) {
	lr, snap, err := s.lookup(ctx, p, id, ActionReadRun)
	if err != nil {
		return nil, err
	}
	if snap != nil {
		return snap.View, nil
	}
	select {
	case <-lr.done:
		return lr.finalView(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// List returns up to limit of the runs p started and may still read, those
// in flight first, then the finished ones newest first.
func (s *Service) List(ctx context.Context, p Principal, limit int) ([]*View, error) {
	if p.ID == "" {
		return nil, &Error{Code: CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"}
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var out []*View
	s.mu.Lock()
	var live []*liveRun
	for _, lr := range s.active {
		if lr.principal.ID == p.ID {
			live = append(live, lr)
		}
	}
	s.mu.Unlock()
	sort.Slice(live, func(i, j int) bool { return live[i].started.After(live[j].started) })
	for _, lr := range live {
		if len(out) == limit {
			return out, nil
		}
		if authorize(ctx, s.opts.Authorizer, p, ActionReadRun, lr.graph) == nil {
			out = append(out, runningView(lr, lr.snapshotEvents()))
		}
	}
	snaps, err := s.store.List(ctx, p.ID, limit-len(out))
	if err != nil {
		return nil, AsError(err)
	}
	for _, sn := range snaps {
		if authorize(ctx, s.opts.Authorizer, p, ActionReadRun, sn.View.Graph) == nil {
			out = append(out, sn.View)
		}
	}
	return out, nil
}

// Subscription is a caller's view of one run's event stream.
type Subscription struct {
	lr   *liveRun
	snap *Snapshot
}

// Subscribe finds p's run with id for streaming its events.
func (s *Service) Subscribe(ctx context.Context, p Principal, id string) (*Subscription, error) {
	lr, snap, err := s.lookup(ctx, p, id, ActionReadRun)
	if err != nil {
		return nil, err
	}
	return &Subscription{lr: lr, snap: snap}, nil
}

// Stream calls yield with each event from index from on: first those
// already recorded, then live ones as they come. When idle is positive and
// no event comes for that long, yield is called with a nil event (for a
// heartbeat). Stream returns after run.finished, when yield fails, or when
// ctx ends. The index given to yield, plus one, resumes the stream.
func (sub *Subscription) Stream(ctx context.Context, from int, idle time.Duration, yield func(i int, ev *run.Event) error) error {
	if from < 0 {
		from = 0
	}
	if sub.snap != nil {
		for i := from; i < len(sub.snap.Events); i++ {
			if err := yield(i, &sub.snap.Events[i]); err != nil {
				return err
			}
		}
		return nil
	}
	var tick <-chan time.Time
	if idle > 0 {
		t := time.NewTicker(idle)
		defer t.Stop()
		tick = t.C
	}
	lr := sub.lr
	for {
		batch, ended, wake := lr.since(from)
		for i := range batch {
			if err := yield(from, &batch[i]); err != nil {
				return err
			}
			from++
		}
		if ended {
			return nil
		}
		select {
		case <-wake:
		case <-lr.done:
		case <-tick:
			if err := yield(from, nil); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Cancel cancels p's run with id and waits (bounded by ctx) for it to stop.
// A run that already finished cannot be cancelled.
func (s *Service) Cancel(ctx context.Context, p Principal, id string) (*View, error) {
	lr, snap, err := s.lookup(ctx, p, id, ActionCancelRun)
	if err != nil {
		return nil, err
	}
	if snap != nil {
		if snap.View.Status == run.StatusAwaitingApproval {
			// The run returned, paused: cancelling it voids its approvals.
			if c, ok := s.exec.(Canceller); ok && c.Cancel(ctx, id) {
				return s.markCancelled(ctx, snap), nil
			}
		}
		return snap.View, &Error{Code: CodeNotCancellable, Status: http.StatusConflict,
			Message: fmt.Sprintf("the run already finished (%s)", snap.View.Status)}
	}
	lr.cancel(errCancelledByUser)
	select {
	case <-lr.done:
		return lr.finalView(), nil
	case <-ctx.Done():
		return runningView(lr, lr.snapshotEvents()), nil
	}
}

// markCancelled records that a paused run was cancelled.
func (s *Service) markCancelled(ctx context.Context, snap *Snapshot) *View {
	var vj viewJSON
	if err := json.Unmarshal(snap.View.JSON, &vj); err != nil {
		return snap.View
	}
	v := *snap.View
	v.Status, v.Code, v.Message = run.StatusCancelled, CodeCancelled, "the run was cancelled"
	vj.Status, vj.ErrorCode, vj.Error = v.Status, v.Code, v.Message
	b, err := marshalView(&vj)
	if err != nil {
		return snap.View
	}
	v.JSON = b
	if err := s.store.Save(ctx, &Snapshot{View: &v, Events: snap.Events}); err != nil {
		s.log.Error("run store: save failed", "run_id", v.RunID, "error", s.redact(err.Error()))
	}
	return &v
}

// Close refuses new runs, cancels those in flight and waits for them to
// stop, or for ctx to end.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("runs still stopping: %w", ctx.Err())
	}
}

// Active returns the number of runs in flight.
func (s *Service) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
