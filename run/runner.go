package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"sync"
	"time"
	"unsafe"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
)

// Limits bound a run.
type Limits struct {
	Deadline  time.Duration
	MaxSteps  int
	MaxTokens int
	// MaxCostUSD caps a run's model spend, priced by Config.Prices.
	MaxCostUSD float64
	// MaxEgressBytes caps the bytes a run exchanges with the outside.
	MaxEgressBytes int64
}

// DefaultLimits apply to every run whoever starts it; Ceilings can't be
// exceeded by configuration, a graph or a caller.
var (
	DefaultLimits = Limits{Deadline: 5 * time.Minute, MaxSteps: 1000, MaxTokens: 200_000, MaxCostUSD: 5, MaxEgressBytes: 256 << 20}
	Ceilings      = Limits{Deadline: time.Hour, MaxSteps: 100_000, MaxTokens: 10_000_000, MaxCostUSD: 1000, MaxEgressBytes: 16 << 30}
)

// MaxDelegationDepth bounds how deep runs may start sub-runs.
const MaxDelegationDepth = 4

// Config configures a Runner. Nil means the defaults.
type Config struct {
	// Kernel runs every node; nil means kernel.New(nil).
	Kernel *kernel.Kernel
	// Concurrency bounds the nodes running at once across all runs (default 256).
	Concurrency int
	// Limits are the defaults for each run; zero fields take DefaultLimits.
	// A field above its ceiling is an error from NewRunner.
	Limits Limits
	// Prices is the table model spend is priced by; nil means
	// kernel.DefaultPrices.
	Prices kernel.Prices
	// Grace is how long a cancelled or timed-out run waits for in-flight
	// nodes to return before it reports (default 200ms).
	Grace time.Duration
}

// Runner runs graphs. It is safe for concurrent use.
type Runner struct {
	k      *kernel.Kernel
	sem    *semaphore
	limits Limits
	grace  time.Duration
	prices kernel.Prices

	mu      sync.Mutex
	active  *exec // the runs in flight, linked through exec.prev and exec.next
	nactive int
	// scanning counts the keeper's passes over the runs in flight under
	// way: a run that leaves meanwhile may still be looked at.
	scanning int
	keeper   keeper // the deadlines of the active runs
}

// NewRunner returns a Runner, or an error if a limit exceeds its ceiling.
func NewRunner(cfg *Config) (*Runner, error) {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Kernel == nil {
		c.Kernel = kernel.New(nil)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.Grace <= 0 {
		c.Grace = 200 * time.Millisecond
	}
	l := c.Limits
	if l.Deadline == 0 {
		l.Deadline = DefaultLimits.Deadline
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultLimits.MaxSteps
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = DefaultLimits.MaxTokens
	}
	if l.MaxCostUSD == 0 {
		l.MaxCostUSD = DefaultLimits.MaxCostUSD
	}
	if l.MaxEgressBytes == 0 {
		l.MaxEgressBytes = DefaultLimits.MaxEgressBytes
	}
	if c.Prices == nil {
		c.Prices = kernel.DefaultPrices()
	}
	switch {
	case l.Deadline < 0 || l.Deadline > Ceilings.Deadline:
		return nil, fmt.Errorf("run deadline %v is outside (0, %v]", l.Deadline, Ceilings.Deadline)
	case l.MaxSteps < 0 || l.MaxSteps > Ceilings.MaxSteps:
		return nil, fmt.Errorf("max steps %d is outside (0, %d]", l.MaxSteps, Ceilings.MaxSteps)
	case l.MaxTokens < 0 || l.MaxTokens > Ceilings.MaxTokens:
		return nil, fmt.Errorf("max tokens %d is outside (0, %d]", l.MaxTokens, Ceilings.MaxTokens)
	case l.MaxEgressBytes < 0 || l.MaxEgressBytes > Ceilings.MaxEgressBytes:
		return nil, fmt.Errorf("max egress bytes %d is outside (0, %d]", l.MaxEgressBytes, Ceilings.MaxEgressBytes)
	case l.MaxCostUSD < 0 || l.MaxCostUSD > Ceilings.MaxCostUSD:
		return nil, fmt.Errorf("max cost $%g is outside (0, %g]", l.MaxCostUSD, Ceilings.MaxCostUSD)
	}
	r := &Runner{k: c.Kernel, sem: newSemaphore(c.Concurrency), limits: l, grace: c.Grace, prices: c.Prices}
	r.keeper.r = r
	c.Kernel.Kill().OnEngage(r.killAll)
	return r, nil
}

// killAll cancels every run in flight: the kill switch was engaged.
func (r *Runner) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for e := r.active; e != nil; e = e.next {
		e.stop(errKilled)
	}
}

// Active returns how many runs are in flight.
func (r *Runner) Active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nactive
}

// enter lists e among the runs in flight.
func (r *Runner) enter(e *exec) {
	r.mu.Lock()
	e.next = r.active
	if e.next != nil {
		e.next.prev = e
	}
	r.active = e
	r.nactive++
	r.mu.Unlock()
}

// leave takes e off the runs in flight.
func (r *Runner) leave(e *exec) {
	r.mu.Lock()
	e.left = r.scanning == 0 // read by the run's own goroutine only
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		r.active = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
	r.nactive--
	r.mu.Unlock()
}

// Kernel returns the runner's kernel.
func (r *Runner) Kernel() *kernel.Kernel { return r.k }

// Request is one run to make.
type Request struct {
	Graph *graph.Graph
	Input agent.Message
	// Principal is who started the run.
	Principal string
	// RunID is chosen by the caller, or generated when empty.
	RunID string
	// Deadline and MaxSteps can only lower the runner's and graph's limits.
	Deadline time.Duration
	MaxSteps int
	// OnEvent receives the run's events in order, from the scheduler's
	// goroutine; it must not block.
	OnEvent func(Event)
	// Parent is the run this one was started from; it shares its budget.
	Parent *kernel.Run
	// Resume holds the outputs of nodes that already succeeded in an
	// earlier attempt of this run (Result.Checkpoint): they are not run
	// again. A run paused for approval resumes this way.
	Resume map[string]agent.Message
}

// NewID returns a fresh random run id.
func NewID() string {
	var h [2 * idBytes]byte
	newID(&h)
	return string(h[:])
}

// newID writes a fresh random run id to h, in hex.
func newID(h *[2 * idBytes]byte) {
	g := idRand.Get().(*mrand.ChaCha8)
	var b [idBytes]byte
	_, _ = g.Read(b[:])
	idRand.Put(g)
	hex.Encode(h[:], b[:])
}

const idBytes = 12

// idRand holds generators of random bytes for run ids: ChaCha8, each seeded
// from crypto/rand, so ids stay unguessable while costing no system call
// (one read of crypto/rand per id cost more than the rest of a small run).
var idRand = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}}

func lower(cur, asked int64) int64 {
	if asked > 0 && asked < cur {
		return asked
	}
	return cur
}

// Run executes req.Graph and returns when the run has finished, paused for
// approval, been cancelled (ctx) or hit its deadline — at the deadline even
// if a node ignores its context.
func (r *Runner) Run(ctx context.Context, req *Request) *Result {
	g := req.Graph
	deadline := time.Duration(lower(lower(int64(r.limits.Deadline), int64(g.Limits.Deadline)), int64(req.Deadline)))
	steps := lower(lower(int64(r.limits.MaxSteps), int64(g.Limits.MaxSteps)), int64(req.MaxSteps))
	tokens := lower(int64(r.limits.MaxTokens), int64(g.Limits.MaxTokens))

	// The scheduler's state is reused from an earlier run; what outlives
	// the run (its kernel view, budget, context and id) is one allocation.
	e, sh := newExec(), new(shared)
	e.sh = sh
	kr := &sh.krv
	kr.ID, kr.Graph, kr.Principal, kr.UntrustedCaller = req.RunID, g.Name, req.Principal, req.Input.Labels.Has(agent.Untrusted)
	if kr.ID == "" {
		newID(&sh.id)
		kr.ID = unsafe.String(&sh.id[0], len(sh.id)) // sh.id is never written again
	}
	kr.RootID = kr.ID
	if p := req.Parent; p != nil {
		kr.Budget, kr.RootID, kr.ParentID, kr.Depth = p.Budget, p.RootID, p.ID, p.Depth+1
		if kr.Depth > MaxDelegationDepth {
			now := time.Now()
			return &Result{RunID: kr.ID, Graph: g.Name, Principal: kr.Principal, Status: StatusLimitExceeded,
				Error: fmt.Sprintf("limit exceeded: delegation depth (max %d)", MaxDelegationDepth), StartedAt: now, FinishedAt: now}
		}
	} else {
		b := &sh.budget
		b.MaxSteps, b.MaxTokens = steps, tokens
		b.MaxCostMicros, b.Prices = int64(r.limits.MaxCostUSD*1e6), r.prices
		b.MaxEgressBytes = r.limits.MaxEgressBytes
		kr.Budget = b
	}
	e.init(r, g, kr, req.OnEvent)
	e.resume = maps.Clone(req.Resume)
	if r.k.Kill().Engaged() {
		now := time.Now()
		return &Result{RunID: kr.ID, Graph: g.Name, Principal: kr.Principal, Status: StatusDenied,
			Error: "the kill switch is engaged: no new runs", StartedAt: now, FinishedAt: now}
	}
	res := e.run(ctx, deadline, req.Input)
	e.recycle()
	return res
}

// errDeadline and errFailed are the causes a run's context is cancelled with.
var (
	errDeadline = errors.New("run deadline reached")
	errFailed   = errors.New("run failed")
	errPaused   = errors.New("run paused for approval")
	errKilled   = errors.New("run stopped by the kill switch")
)
