// Package kernel is the one door through which any agent runs.
//
// Invoke authorizes the call, checks its declared effects and arguments,
// applies labels and the Rule of Two, asks for approval, writes the audit
// record first, hands the node only its declared secrets, charges the
// budget, runs the agent, and redacts what comes back. Nothing else in
// Babelagent may call Agent.Run: not the scheduler, not an LLM's tool loop,
// not a server handler.
//
// Nothing a graph, a peer or a model sends can turn a control off; only the
// operator's Options can, and each such choice is itself audited.
package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/audit"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/secrets"
)

// Scoper hands a call the secrets its node declares, and nothing else.
type Scoper interface {
	Scope(ctx context.Context, names []string) (*agent.Secrets, error)
}

// Authorizer says whether a principal may act on a resource. An error denies.
type Authorizer interface {
	Authorize(ctx context.Context, principal, action, resource string) error
}

// Options configures a Kernel. Nil means the defaults: no secrets, no
// audit sink, in-memory approvals, every control on.
type Options struct {
	Secrets  Scoper
	Redactor *secrets.Redactor
	// Authorizer is consulted on every call; nil allows every principal
	// (the CLI's local user runs its own graphs).
	Authorizer Authorizer
	// Audit receives an intent record before every call and an outcome
	// after; if the intent cannot be written the call does not run.
	Audit audit.Sink
	// Approvals decides consequential calls; nil means in-memory approvals.
	Approvals Approvals
	// Kill is the global kill switch; nil means a fresh, disengaged one.
	Kill *KillSwitch
	// BreakerLimit stops a node repeating the same call with the same
	// arguments this many times in one run (default 5).
	BreakerLimit int
	// ConsequentialPerMinute caps write/egress/exec calls per run per
	// minute (default 120).
	ConsequentialPerMinute int
	// MaxApprovalRequests caps the approval requests one run may raise
	// (default 10): a run cannot flood approvers into fatigue.
	MaxApprovalRequests int
	// UnsafeDisableRuleOfTwo turns the Rule of Two off. Operator only; it
	// is logged and audited when the kernel starts.
	UnsafeDisableRuleOfTwo bool
	// Logger receives operational logs (redacted); nil discards them.
	Logger *slog.Logger
	// Tracer observes runs and calls (OpenTelemetry spans); nil observes nothing.
	Tracer Tracer
}

// Tracer observes runs and calls, for OpenTelemetry spans. It must record
// no content (arguments, outputs, prompts) unless its operator asked for it.
type Tracer interface {
	// StartRun begins a run's span; end receives its final status.
	StartRun(ctx context.Context, r *Run) (context.Context, func(status string))
	// StartCall begins a node or tool call's span; end receives its error.
	StartCall(ctx context.Context, c *Call) (context.Context, func(err error))
}

// Kernel runs agents. It is safe for concurrent use.
type Kernel struct {
	opts Options
}

// New returns a kernel.
func New(opts *Options) *Kernel {
	k := &Kernel{}
	if opts != nil {
		k.opts = *opts
	}
	if k.opts.Approvals == nil {
		k.opts.Approvals = NewMemoryApprovals(0)
	}
	if k.opts.Kill == nil {
		k.opts.Kill = &KillSwitch{}
	}
	if k.opts.BreakerLimit <= 0 {
		k.opts.BreakerLimit = 5
	}
	if k.opts.MaxApprovalRequests <= 0 {
		k.opts.MaxApprovalRequests = 10
	}
	if k.opts.ConsequentialPerMinute <= 0 {
		k.opts.ConsequentialPerMinute = 120
	}
	if k.opts.Logger == nil {
		k.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if k.opts.UnsafeDisableRuleOfTwo {
		k.opts.Logger.Warn("the Rule of Two is DISABLED by operator flag: consequential calls on untrusted and sensitive data run without approval")
		k.record(context.Background(), &audit.Record{Kind: "config.changed", Status: "rule_of_two_disabled", Principal: "operator"})
	}
	return k
}

// StartRun lets the tracer open a run's span (a no-op without a tracer).
func (k *Kernel) StartRun(ctx context.Context, r *Run) (context.Context, func(status string)) {
	r.redactGen = k.opts.Redactor.Generation()
	if k.opts.Tracer == nil {
		return ctx, func(string) {}
	}
	return k.opts.Tracer.StartRun(ctx, r)
}

// Kill returns the kernel's kill switch.
func (k *Kernel) Kill() *KillSwitch { return k.opts.Kill }

// Approvals returns the kernel's approval store.
func (k *Kernel) Approvals() Approvals { return k.opts.Approvals }

// Run is the kernel's view of one run: who started it, what it may spend,
// and the labels of the data it holds so far.
type Run struct {
	ID        string
	Graph     string
	Principal string
	RootID    string
	ParentID  string
	// Depth is how many runs delegated to reach this one (0 for a root run).
	Depth  int
	Budget *Budget
	// UntrustedCaller is set when the run's input came from someone other
	// than its principal (a webhook, a peer agent): such a principal may
	// not approve the run's own calls.
	UntrustedCaller bool
	labels          atomic.Uint32
	// redactGen is the redactor's generation when the run started: while
	// it holds, what the kernel redacted during the run is redacted still.
	redactGen int

	mu        sync.Mutex
	approvals int
	repeats   map[string]int
	window    time.Time
	inWin     int
}

// Labels returns the labels of every piece of data the run holds so far.
func (r *Run) Labels() agent.Labels { return agent.Labels(r.labels.Load()) }

// Hold adds ls to the run's labels (the run's input, a resumed checkpoint).
func (r *Run) Hold(ls agent.Labels) {
	for {
		old := r.labels.Load()
		nw := old | uint32(ls)
		if nw == old || r.labels.CompareAndSwap(old, nw) {
			return
		}
	}
}

// Call is one invocation of a node, or of a tool by a node. A Call is
// passed to Invoke once.
type Call struct {
	Run   *Run
	Node  *graph.Node
	Input agent.Message
	// Attempt counts from 1.
	Attempt int
	// Parent is the call whose agent called this tool; nil for a node.
	Parent *Call
	// InputRedacted says Input is made of outputs of earlier kernel calls,
	// which the kernel redacted, in a way a redaction of the whole would
	// not change: a part the agent hands back untouched is not scanned
	// again.
	InputRedacted bool
	// Scope, when set, is where Invoke makes the agent's context, rather
	// than in the Call. An agent may keep its context after its call
	// returns: a caller that reuses a Call for another call gives each call
	// a Scope of its own, and reuses the Call only once its call returned
	// and only if its node has no tools (a toolset holds its Call).
	Scope *Scope

	scope Scope // used when Scope is nil
}

// Scope is what the agent of a call can reach, which may outlive the
// call: its context, and through it who and what the call is, the secrets
// it may use, what it may spend and the tools it may call.
type Scope struct {
	ctx     agent.CallScope
	run     *Run
	node    *graph.Node
	attempt int
	secrets *agent.Secrets // the call's, if its node declares any
	tools   *toolset       // the call's, if its node has tools
}

// CallContext is what the agent sees of its call (none of the secrets
// unless its node declares some).
func (s *Scope) CallContext() agent.CallContext {
	n := s.node
	cc := agent.CallContext{
		Info:    agent.CallInfo{RunID: s.run.ID, Node: n.Name, Principal: s.run.Principal, Attempt: s.attempt, Effects: n.Card.Effects},
		Meter:   s.run.Budget,
		Secrets: s.secrets,
	}
	if s.tools != nil {
		cc.Tools = s.tools
	}
	return cc
}

// KindNodeCall is the single audit record of a call with no consequential
// effect (none or read), written when it ends.
const KindNodeCall = "node.call"

// Invoke runs c's agent under every control. It is the only function that
// calls Agent.Run.
func (k *Kernel) Invoke(ctx context.Context, c *Call) (out agent.Message, err error) {
	if t := k.opts.Tracer; t != nil {
		var end func(error)
		ctx, end = t.StartCall(ctx, c)
		defer func() { end(err) }()
	}
	n := c.Node
	if err := ctx.Err(); err != nil {
		return agent.Message{}, err
	}
	if n.Agent == nil {
		return agent.Message{}, fmt.Errorf("node %s has no agent", n.Name)
	}
	if k.opts.Kill.Engaged() {
		return agent.Message{}, &DeniedError{Node: n.Name, Reason: "the kill switch is engaged"}
	}
	if a := k.opts.Authorizer; a != nil {
		if err := a.Authorize(ctx, c.Run.Principal, "graph.run", c.Run.Graph); err != nil {
			k.record(ctx, k.base(c, "node.denied", "denied", err.Error()))
			return agent.Message{}, &DeniedError{Node: n.Name, Reason: "policy: " + err.Error()}
		}
	}
	if err := undeclaredEffect(n); err != nil {
		return agent.Message{}, err
	}
	if err := n.ValidateInput(c.Input); err != nil {
		return agent.Message{}, err
	}
	if err := c.Run.Budget.Step(); err != nil {
		return agent.Message{}, err
	}
	c.Run.Hold(c.Input.Labels)

	var args json.RawMessage
	var digest string
	consequential := n.Card.Consequential()
	if consequential || k.opts.Audit != nil {
		args, digest = k.canonicalArgs(c)
	}
	var approval Decision
	if consequential {
		if reason := k.needsApproval(c); reason != "" {
			approval, err = k.approve(ctx, c, args, digest, reason)
			if err != nil {
				return agent.Message{}, err
			}
		}
		if err := k.breaker(c, digest); err != nil {
			k.record(ctx, k.base(c, "node.denied", "breaker", err.Error()))
			return agent.Message{}, err
		}
	}

	// Write-ahead: the intent of a consequential call is durable before the
	// action starts. A call with no consequential effect gets one record,
	// written when it ends (kernel.outcome), holding its arguments too.
	if k.opts.Audit != nil && consequential {
		r := k.base(c, audit.KindNodeIntent, "started", "")
		r.Args, r.ApprovalDigest = args, digestIf(approval.Verdict == Approved, digest)
		if approval.Verdict == Approved {
			r.Decision, r.Approver = "approved", approval.Approver
		}
		if err := k.write(ctx, r, true); err != nil {
			return agent.Message{}, &AuditError{Err: err}
		}
	}

	sc := c.Scope
	if sc == nil {
		sc = &c.scope
	}
	sc.run, sc.node, sc.attempt = c.Run, n, c.Attempt
	if len(n.Card.Secrets) > 0 {
		if k.opts.Secrets == nil {
			return k.outcome(ctx, c, args, agent.Message{}, &DeniedError{Node: n.Name, Reason: "node declares secrets but no secret source is configured"})
		}
		ss, err := k.opts.Secrets.Scope(ctx, n.Card.Secrets)
		if err != nil {
			return k.outcome(ctx, c, args, agent.Message{}, fmt.Errorf("node %s: secrets: %w", n.Name, err))
		}
		for _, name := range n.Card.Secrets {
			r := k.base(c, "secret.used", "issued", "")
			r.Secret = name
			k.record(ctx, r)
		}
		sc.secrets = ss
	}
	if len(n.Tools) > 0 {
		sc.tools = &toolset{k: k, call: c}
		sc.tools.labels.Store(uint32(c.Input.Labels))
	}
	// One value for the whole call: nothing of the caller's call (an LLM's
	// secrets or tools, for a tool it calls) shows through. It is made
	// when the agent first looks (Scope.CallContext).
	cctx := sc.ctx.BindFrom(ctx, sc)

	out, err = k.execute(cctx, n, c.Input)
	if err != nil {
		return k.outcome(ctx, c, args, agent.Message{}, k.redactErr(err))
	}
	labels := c.Input.Labels.Union(out.Labels)
	if sc.tools != nil {
		labels = labels.Union(agent.Labels(sc.tools.labels.Load()))
	}
	if n.Card.ReadsOutside && !n.Trusted {
		labels = labels.With(agent.Untrusted)
	}
	if n.Sensitive {
		labels = labels.With(agent.Sensitive)
	}
	out = k.redactMessage(out, c)
	out.Labels = labels
	c.Run.Hold(labels)
	return k.outcome(ctx, c, args, out, nil)
}

// outcome writes the outcome record of a call that started; args are its
// canonical arguments, which a pure call's one record holds.
func (k *Kernel) outcome(ctx context.Context, c *Call, args json.RawMessage, out agent.Message, err error) (agent.Message, error) {
	if k.opts.Audit == nil {
		return out, err
	}
	r := k.base(c, audit.KindNodeOutcome, "succeeded", "")
	if !c.Node.Card.Consequential() {
		// The only record of a pure call: what it was given, how it ended.
		r = k.base(c, KindNodeCall, "succeeded", "")
		r.Args = args
	}
	if err != nil {
		r.Status, r.Error = "failed", truncate(k.Redact(err.Error()), 500)
	} else if v, verr := out.Value(); verr == nil {
		r.ResultDigest = audit.Digest(v)
	}
	// The action already happened: the outcome need not be waited for. A
	// failed write is logged, and the next consequential intent fails
	// closed if the log is really down.
	if aerr := k.write(context.WithoutCancel(ctx), r, false); aerr != nil {
		k.opts.Logger.Error("audit outcome not written", "run", c.Run.ID, "node", c.Node.Name, "err", aerr)
	}
	return out, err
}

// execute calls the agent, turning a panic into the node's error.
func (k *Kernel) execute(ctx context.Context, n *graph.Node, in agent.Message) (out agent.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &agent.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return n.Agent.Run(ctx, in)
}

// Redact removes secret values and credential patterns from s; every error
// and trace line passes through it before it leaves.
func (k *Kernel) Redact(s string) string { return k.opts.Redactor.Redact(s) }

func (k *Kernel) redactErr(err error) error {
	msg := err.Error()
	if red := k.opts.Redactor.Redact(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// redactedError shows a redacted message but keeps the chain for errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactMessage scrubs secret values from every text and data part of c's
// output m. A part that is one of c's redacted input's, the same string or
// the same bytes, is clean already, unless a secret was registered since.
func (k *Kernel) redactMessage(m agent.Message, c *Call) agent.Message {
	// A secret registered since the run started may be in what was
	// redacted before it was.
	clean := c.InputRedacted && k.opts.Redactor.Generation() == c.Run.redactGen
	var parts []agent.Part
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Kind {
		case agent.PartText:
			if clean && sameText(p.Text, c.Input) {
				continue
			}
			if t := k.opts.Redactor.Redact(p.Text); t != p.Text {
				if parts == nil {
					parts = slices.Clone(m.Parts)
				}
				parts[i].Text = t
			}
		case agent.PartData:
			// Bytes can change in place, strings cannot: only a node
			// holding no secret may hand back its input's bytes unscanned.
			if clean && len(c.Node.Card.Secrets) == 0 && sameData(p.Data, c.Input) {
				continue
			}
			if d := k.opts.Redactor.RedactJSON(p.Data); string(d) != string(p.Data) {
				if parts == nil {
					parts = slices.Clone(m.Parts)
				}
				parts[i].Data = d
			}
		}
	}
	if parts != nil {
		m.Parts = parts
	}
	return m
}

// sameText reports whether s is, the very string and not a copy, the text
// of one of in's parts.
func sameText(s string, in agent.Message) bool {
	for _, p := range in.Parts {
		if p.Kind == agent.PartText && len(p.Text) == len(s) && unsafe.StringData(p.Text) == unsafe.StringData(s) {
			return true
		}
	}
	return false
}

// sameData reports whether b is, the very bytes and not a copy, the data
// of one of in's parts.
func sameData(b []byte, in agent.Message) bool {
	for _, p := range in.Parts {
		if p.Kind == agent.PartData && len(p.Data) == len(b) && len(b) > 0 && unsafe.SliceData(p.Data) == unsafe.SliceData(b) {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func digestIf(ok bool, d string) string {
	if ok {
		return d
	}
	return ""
}
