package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/audit"
	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/policy"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
	"github.com/babelagent/babel/secrets/broker"
	"github.com/babelagent/babel/store"
	"github.com/babelagent/babel/telemetry"
)

// Engine is a configured Babelagent: open one per process.
type Engine struct {
	Config   Config
	Registry *graph.Registry
	Kernel   *kernel.Kernel
	Runner   *run.Runner
	Store    *store.Store
	Redactor *secrets.Redactor
	Logger   *slog.Logger

	// Metrics are the Prometheus metrics of this engine's runs and calls.
	Metrics *telemetry.Metrics

	audit  *audit.Writer
	authz  kernel.Authorizer
	shared *catalog.Shared
	policy *policy.Policy
	tracer *telemetry.Tracer

	mu     sync.Mutex
	cancel map[string]context.CancelCauseFunc
}

// Options are what the process hands the engine beyond its Config.
type Options struct {
	// Environ is the process environment, snapshotted once by main. Only
	// HOME/XDG_* (for defaults) and the names nodes declare as secrets are
	// ever read from it.
	Environ []string
	// Authorizer overrides the policy (tests); nil loads Config.PolicyFile
	// or the default: the local user may do anything, nobody else anything.
	Authorizer kernel.Authorizer
	Logger     *slog.Logger
	// Tracer observes runs and calls (OpenTelemetry).
	Tracer kernel.Tracer
}

// Open builds an engine from cfg. It fails on a configuration above a
// ceiling, an unusable data directory, or an audit log it cannot open
// (unless the operator disabled audit, which is itself recorded).
func Open(ctx context.Context, cfg Config, opts *Options) (*Engine, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	e := &Engine{Config: cfg, cancel: map[string]context.CancelCauseFunc{}}
	e.Redactor = secrets.NewRedactor()
	e.Logger = opts.Logger
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	e.Logger = slog.New(secrets.NewRedactingHandler(e.Logger.Handler(), e.Redactor))

	st, err := store.Open(ctx, filepath.Join(cfg.DataDir, "babel.db"), &store.Options{ApprovalTimeout: cfg.ApprovalTimeout.D()})
	if err != nil {
		return nil, err
	}
	e.Store = st

	var sink audit.Sink
	w, err := audit.Open(ctx, filepath.Join(cfg.DataDir, "audit", "audit.db"), &audit.Options{KeyPath: cfg.AuditKey})
	switch {
	case err != nil && !cfg.UnsafeDisableAudit:
		st.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	case cfg.UnsafeDisableAudit:
		if w != nil {
			_, _ = w.Append(ctx, &audit.Record{Kind: "audit.disabled", Principal: "operator", Status: "disabled by operator flag"})
			w.Close()
		}
		e.Logger.Warn("AUDIT IS DISABLED by operator flag: actions are not recorded")
	default:
		e.audit, sink = w, w
	}

	var sources secrets.Chain
	if cfg.SecretsFile != "" {
		sources = append(sources, secrets.NewFile(cfg.SecretsFile))
	}
	sources = append(sources, secrets.NewEnv(opts.Environ))

	e.authz = opts.Authorizer
	if e.authz == nil {
		p, err := loadPolicy(cfg.PolicyFile, opts.Environ)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.policy, e.authz = p, authorizer{p}
	}
	tracer := opts.Tracer
	if tracer == nil {
		e.Metrics = telemetry.NewMetrics()
		t, err := telemetry.New(&telemetry.Options{OTLPEndpoint: cfg.OTLPEndpoint, Metrics: e.Metrics})
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		e.tracer, tracer = t, t
	}
	e.Kernel = kernel.New(&kernel.Options{
		Secrets: broker.New(sources, e.Redactor), Redactor: e.Redactor, Authorizer: e.authz,
		Audit: sink, Approvals: st, UnsafeDisableRuleOfTwo: cfg.UnsafeDisableRuleOfTwo,
		Logger: e.Logger, Tracer: tracer,
	})
	e.Runner, err = run.NewRunner(&run.Config{Kernel: e.Kernel, Concurrency: cfg.Limits.Concurrency, Limits: run.Limits{
		Deadline: cfg.Limits.Deadline.D(), MaxSteps: cfg.Limits.MaxSteps, MaxTokens: cfg.Limits.MaxTokens,
		MaxCostUSD: cfg.Limits.MaxCostUSD, MaxEgressBytes: cfg.Limits.MaxEgressBytes,
	}, Prices: cfg.Prices})
	if err != nil {
		e.Close()
		return nil, err
	}
	if killed, err := st.Killed(ctx); err != nil {
		e.Close()
		return nil, err
	} else if killed {
		e.Kernel.Kill().Engage()
	}
	e.shared = catalog.NewShared()
	e.Registry = catalog.Registry(&catalog.Options{Shared: e.shared})
	return e, nil
}

// Close releases the store and the audit log.
func (e *Engine) Close() error {
	var errs []error
	if e.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, e.shared.Close(ctx))
		cancel()
	}
	if e.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, e.tracer.Shutdown(ctx))
		cancel()
	}
	if e.audit != nil {
		errs = append(errs, e.audit.Close())
	}
	if e.Store != nil {
		errs = append(errs, e.Store.Close())
	}
	return errors.Join(errs...)
}

// AuditPath is the audit log's file.
func (e *Engine) AuditPath() string { return filepath.Join(e.Config.DataDir, "audit", "audit.db") }

// Authorize asks the policy.
func (e *Engine) Authorize(ctx context.Context, principal, action, resource string) error {
	return e.authz.Authorize(ctx, principal, action, resource)
}

// Load reads and compiles the topology at an explicit path.
func (e *Engine) Load(path string) (*graph.Graph, error) {
	spec, err := graph.LoadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return graph.Compile(spec, catalog.Registry(&catalog.Options{Dir: dir, Shared: e.shared}), nil)
}

// Start is one run to make.
type Start struct {
	Graph     *graph.Graph
	Source    string // the topology file, so a paused run can resume
	Input     agent.Message
	Principal string
	RunID     string
	Deadline  time.Duration
	OnEvent   func(run.Event)
	Resume    map[string]agent.Message
}

// Run authorizes and runs a graph, persisting the run (and its checkpoint
// when it pauses for approval).
func (e *Engine) Run(ctx context.Context, s *Start) *run.Result {
	id := s.RunID
	if id == "" {
		id = run.NewID()
	}
	if err := e.authz.Authorize(ctx, s.Principal, "graph.run", s.Graph.Name); err != nil {
		now := time.Now()
		_ = e.Kernel.Record(ctx, &audit.Record{Kind: "run.denied", RunID: id, RootRunID: id, Principal: s.Principal, Agent: s.Graph.Name, Status: "denied", Error: err.Error()})
		return &run.Result{RunID: id, Graph: s.Graph.Name, Principal: s.Principal, Status: run.StatusDenied,
			Error: "denied: " + err.Error(), StartedAt: now, FinishedAt: now}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.mu.Lock()
	e.cancel[id] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.cancel, id)
		e.mu.Unlock()
	}()
	res := e.Runner.Run(ctx, &run.Request{
		Graph: s.Graph, Input: s.Input, Principal: s.Principal, RunID: id, Deadline: s.Deadline,
		OnEvent: s.OnEvent, Resume: s.Resume,
	})
	save := e.Store.QueueRun
	if !res.Status.Terminal() || s.Resume != nil {
		// It will be resumed, or it replaces a stored paused run: durable
		// before we answer, so nobody resumes it twice.
		save = e.Store.SaveRun
	}
	if err := save(context.WithoutCancel(ctx), res, s.Input, s.Source); err != nil {
		e.Logger.Error("run not saved", "run", id, "err", err)
	}
	return res
}

// Cancel stops a run in flight; its pending approvals are voided.
func (e *Engine) Cancel(ctx context.Context, runID string) bool {
	e.mu.Lock()
	c, ok := e.cancel[runID]
	e.mu.Unlock()
	if ok {
		c(errors.New("cancelled"))
	}
	if n, err := e.Store.VoidRun(ctx, runID); err == nil && n > 0 {
		ok = true
	}
	return ok
}

// Resume continues a run paused for approval, from its checkpoint.
func (e *Engine) Resume(ctx context.Context, runID string, g *graph.Graph, onEvent func(run.Event)) (*run.Result, error) {
	rec, err := e.Store.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	if rec.Result.Status != run.StatusAwaitingApproval {
		return nil, fmt.Errorf("run %s is %s, not awaiting approval", runID, rec.Result.Status)
	}
	if g == nil {
		if rec.Source == "" {
			return nil, fmt.Errorf("run %s has no topology file on record", runID)
		}
		if g, err = e.Load(rec.Source); err != nil {
			return nil, err
		}
	}
	if g.Name != rec.Result.Graph {
		return nil, fmt.Errorf("run %s is of graph %s, not %s", runID, rec.Result.Graph, g.Name)
	}
	if onEvent != nil {
		decided, _ := e.Store.RunApprovals(ctx, runID)
		for _, a := range decided {
			if !a.DecidedAt.IsZero() {
				onEvent(run.Event{Type: run.EventApprovalDecided, RunID: runID, Graph: g.Name, Node: a.Node,
					Time: a.DecidedAt, Status: a.Status, Error: a.ID})
			}
		}
	}
	return e.Run(ctx, &Start{Graph: g, Source: rec.Source, Input: rec.Input, Principal: rec.Result.Principal,
		RunID: runID, OnEvent: onEvent, Resume: rec.Checkpoint}), nil
}

// ErrSelfApproval refuses an approval by the principal whose untrusted run asks for it.
var ErrSelfApproval = fmt.Errorf("the principal that started an untrusted run cannot approve its calls: %w", ErrForbidden)

// ErrForbidden wraps every refusal by policy.
var ErrForbidden = errors.New("forbidden")

// PendingApprovals lists the calls waiting for a decision, oldest first.
func (e *Engine) PendingApprovals(ctx context.Context) ([]*kernel.ApprovalRequest, error) {
	return e.Store.Approvals(ctx, kernel.StatusPending)
}

// Decide records an approver's decision on an approval request, bound to
// the digest the approver was shown.
func (e *Engine) Decide(ctx context.Context, id, decision, digest, approver string) (*kernel.ApprovalRequest, error) {
	a, err := e.Store.Approval(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := e.authz.Authorize(ctx, approver, "approval.decide", a.Graph); err != nil {
		return nil, fmt.Errorf("denied: %w (%w)", ErrForbidden, err)
	}
	if a.Untrusted && approver == a.Principal {
		return nil, ErrSelfApproval
	}
	if e.policy != nil {
		if err := e.policy.CanApprove(parsePrincipal(approver), a.Graph, parsePrincipal(a.Principal), a.Untrusted); err != nil {
			return nil, fmt.Errorf("denied: %w (%w)", ErrForbidden, err)
		}
	}
	a, err = e.Store.Decide(ctx, id, decision, digest, approver)
	rec := &audit.Record{Kind: "approval.decided", RunID: a.RunID, RootRunID: a.RootRunID, Principal: a.Principal,
		Agent: a.Agent, Node: a.Node, Adapter: a.Adapter, Decision: decision, Approver: approver, ApprovalDigest: digest, Status: a.Status}
	if err != nil {
		rec.Status, rec.Error = "refused", err.Error()
	}
	if aerr := e.Kernel.Record(ctx, rec); aerr != nil && err == nil {
		return nil, fmt.Errorf("audit log unavailable, decision not taken: %w", aerr)
	}
	return a, err
}

// Kill engages (or releases) the global kill switch: runs in flight are
// cancelled, pending approvals voided, new runs refused — here and, through
// the store, in every process sharing it.
func (e *Engine) Kill(ctx context.Context, by string, engage bool) error {
	if err := e.authz.Authorize(ctx, by, "kill", "*"); err != nil {
		return fmt.Errorf("denied: %w (%w)", ErrForbidden, err)
	}
	status := "released"
	if engage {
		status = "engaged"
	}
	if err := e.Kernel.Record(ctx, &audit.Record{Kind: "kill", Principal: by, Status: status}); err != nil {
		return fmt.Errorf("audit log unavailable: %w", err)
	}
	if err := e.Store.SetKilled(ctx, engage); err != nil {
		return err
	}
	if !engage {
		e.Kernel.Kill().Release()
		return nil
	}
	e.Kernel.Kill().Engage()
	_, err := e.Store.VoidRun(ctx, "")
	return err
}
