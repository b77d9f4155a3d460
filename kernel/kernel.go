// Package kernel is the one door through which any agent runs.
//
// Invoke authorizes the call, applies labels and the Rule of Two, asks for
// approval, writes the audit record first, hands the node only its declared
// secrets, charges the budget, runs the agent under its deadline, and
// redacts what comes back. Nothing else in Babelagent may call Agent.Run:
// not the scheduler, not an LLM's tool loop, not a server handler.
package kernel

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// Scoper hands a call the secrets its node declares, and nothing else.
type Scoper interface {
	Scope(ctx context.Context, names []string) (*agent.Secrets, error)
}

// Redactor removes secret values and credential patterns from text.
type Redactor interface {
	Redact(s string) string
}

// Options configures a Kernel. Nil means the defaults: no secrets
// available, nothing to redact beyond the built-in patterns.
type Options struct {
	Secrets  Scoper
	Redactor Redactor
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
	return k
}

// Run is the kernel's view of one run: who started it, what it may spend,
// and the labels of the data it holds so far.
type Run struct {
	ID        string
	Graph     string
	Principal string
	RootID    string
	ParentID  string
	Budget    *Budget
	labels    atomic.Uint32
}

// Labels returns the labels of every piece of data the run holds so far.
func (r *Run) Labels() agent.Labels { return agent.Labels(r.labels.Load()) }

// hold adds ls to the run's labels.
func (r *Run) hold(ls agent.Labels) {
	for {
		old := r.labels.Load()
		nw := old | uint32(ls)
		if nw == old || r.labels.CompareAndSwap(old, nw) {
			return
		}
	}
}

// Call is one invocation of a node, or of a tool by a node.
type Call struct {
	Run     *Run
	Node    *graph.Node
	Input   agent.Message
	Attempt int
	// Parent is the call whose agent called this tool; nil for a node.
	Parent *Call
}

// Invoke runs c's agent under every control. It is the only function that
// calls Agent.Run.
func (k *Kernel) Invoke(ctx context.Context, c *Call) (out agent.Message, err error) {
	n := c.Node
	if err := ctx.Err(); err != nil {
		return agent.Message{}, err
	}
	if n.Agent == nil {
		return agent.Message{}, fmt.Errorf("node %s has no agent", n.Name)
	}
	if err := c.Run.Budget.Step(); err != nil {
		return agent.Message{}, err
	}
	c.Run.hold(c.Input.Labels)

	cctx := agent.WithCallInfo(ctx, &agent.CallInfo{
		RunID: c.Run.ID, Node: n.Name, Principal: c.Run.Principal, Attempt: c.Attempt, Effects: n.Card.Effects,
	})
	if len(n.Card.Secrets) > 0 {
		if k.opts.Secrets == nil {
			return agent.Message{}, &DeniedError{Node: n.Name, Reason: "node declares secrets but no secret source is configured"}
		}
		ss, err := k.opts.Secrets.Scope(ctx, n.Card.Secrets)
		if err != nil {
			return agent.Message{}, fmt.Errorf("node %s: secrets: %w", n.Name, err)
		}
		cctx = agent.WithSecrets(cctx, ss)
	}

	cctx = agent.WithMeter(cctx, c.Run.Budget)
	var ts *toolset
	if len(n.Tools) > 0 {
		ts = &toolset{k: k, call: c}
		ts.labels.Store(uint32(c.Input.Labels))
		cctx = agent.WithTools(cctx, ts)
	}

	out, err = k.execute(cctx, n, c.Input)
	if err != nil {
		return agent.Message{}, err
	}
	labels := c.Input.Labels.Union(out.Labels)
	if ts != nil {
		labels = labels.Union(agent.Labels(ts.labels.Load()))
	}
	if n.Card.ReadsOutside && !n.Trusted {
		labels = labels.With(agent.Untrusted)
	}
	if n.Sensitive {
		labels = labels.With(agent.Sensitive)
	}
	out.Labels = labels
	c.Run.hold(labels)
	return out, nil
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
func (k *Kernel) Redact(s string) string {
	if k.opts.Redactor == nil {
		return s
	}
	return k.opts.Redactor.Redact(s)
}
