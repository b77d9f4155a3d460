package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/audit"
	"github.com/babelagent/babel/graph"
)

// undeclaredEffect refuses a node whose agent declares an effect the node
// did not: what the operator declared is all the call may do.
func undeclaredEffect(n *graph.Node) error {
	for _, e := range n.AgentEffects {
		if e != agent.EffectNone && !slices.Contains(n.Card.Effects, e) {
			return &DeniedError{Node: n.Name, Reason: fmt.Sprintf("agent %s has effect %s, which the node does not declare", n.Card.Name, e)}
		}
	}
	return nil
}

// canonicalArgs returns the call's arguments in canonical, redacted form,
// and the digest that binds approvals to this exact call: node, agent,
// destination and arguments.
func (k *Kernel) canonicalArgs(c *Call) (json.RawMessage, string) {
	raw, err := c.Input.Value()
	if err != nil {
		raw = json.RawMessage("null")
	}
	raw = k.opts.Redactor.RedactJSON(raw)
	canon, err := audit.Canonical(raw)
	if err != nil {
		canon = raw
	}
	n := c.Node
	h := sha256.New()
	for _, s := range []string{n.Name, n.Card.Kind, n.Card.Name} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	for _, s := range n.Card.Egress {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	h.Write(canon)
	return canon, "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// needsApproval says why a consequential call needs a human, or "".
func (k *Kernel) needsApproval(c *Call) string {
	n := c.Node
	held := c.Run.Labels().Union(c.Input.Labels)
	switch {
	case n.Approval == graph.ApprovalRequired:
		return "the node requires approval"
	case !k.opts.UnsafeDisableRuleOfTwo && held.Has(agent.Untrusted) && held.Has(agent.Sensitive):
		return "Rule of Two: a " + n.Card.EffectList() + " call in a run holding untrusted and sensitive data"
	case n.Approval == graph.ApprovalOnUntrusted && c.Input.Labels.Has(agent.Untrusted):
		return "a " + n.Card.EffectList() + " call acting on untrusted data"
	}
	return ""
}

// approve asks the approval store; only an approved call goes on.
func (k *Kernel) approve(ctx context.Context, c *Call, args json.RawMessage, digest, reason string) (Decision, error) {
	n := c.Node
	req := &ApprovalRequest{
		RunID: c.Run.ID, RootRunID: c.Run.RootID, Graph: c.Run.Graph, Node: n.Name, Agent: n.Card.Name,
		Adapter: n.Card.Kind, Destination: slices.Clone(n.Card.Egress), Args: args, Digest: digest,
		Reason: reason, Principal: c.Run.Principal, Untrusted: c.Run.UntrustedCaller,
	}
	for _, e := range n.Card.Effects {
		req.Effects = append(req.Effects, string(e))
	}
	if req.Destination == nil {
		req.Destination = []string{}
	}
	d, err := k.opts.Approvals.Check(ctx, req)
	if err != nil {
		// An approval store that cannot answer denies.
		return d, &DeniedError{Node: n.Name, Reason: "approval store unavailable: " + err.Error()}
	}
	switch d.Verdict {
	case Approved:
		r := k.base(c, "approval.consumed", "approved", "")
		r.Decision, r.Approver, r.ApprovalDigest = "approved", d.Approver, digest
		k.record(ctx, r)
		return d, nil
	case Denied:
		r := k.base(c, "approval.denied", "denied", d.Reason)
		r.Decision, r.Approver, r.ApprovalDigest = "denied", d.Approver, digest
		k.record(ctx, r)
		return d, &DeniedError{Node: n.Name, Reason: d.Reason, Terminate: d.Terminate}
	}
	c.Run.mu.Lock()
	c.Run.approvals++
	over := c.Run.approvals > k.opts.MaxApprovalRequests
	c.Run.mu.Unlock()
	if over {
		return d, &LimitError{Limit: "approval requests per run", Max: int64(k.opts.MaxApprovalRequests)}
	}
	r := k.base(c, "approval.requested", "pending", reason)
	r.Args, r.ApprovalDigest = args, digest
	k.record(ctx, r)
	return d, &ApprovalPendingError{Node: n.Name, ApprovalID: d.ApprovalID, Reason: reason, Digest: digest}
}

// breaker refuses a node repeating the same call too often in one run, and
// caps consequential calls per minute.
func (k *Kernel) breaker(c *Call, digest string) error {
	r := c.Run
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repeats == nil {
		r.repeats = map[string]int{}
	}
	r.repeats[digest]++
	if r.repeats[digest] > k.opts.BreakerLimit {
		return &DeniedError{Node: c.Node.Name, Reason: fmt.Sprintf("breaker: the same call was repeated %d times", k.opts.BreakerLimit)}
	}
	now := time.Now()
	if now.Sub(r.window) > time.Minute {
		r.window, r.inWin = now, 0
	}
	r.inWin++
	if r.inWin > k.opts.ConsequentialPerMinute {
		return &LimitError{Limit: "consequential calls per minute", Max: int64(k.opts.ConsequentialPerMinute)}
	}
	return nil
}

// base fills an audit record's common fields for a call.
func (k *Kernel) base(c *Call, kind, status, errText string) *audit.Record {
	r := &audit.Record{
		Kind: kind, RunID: c.Run.ID, RootRunID: c.Run.RootID, ParentRunID: c.Run.ParentID,
		TraceID: c.Run.RootID, SpanID: newID()[:16], Principal: c.Run.Principal,
		Agent: c.Node.Card.Name, Node: c.Node.Name, Adapter: c.Node.Card.Kind, Status: status,
	}
	if errText != "" {
		r.Error = truncate(k.Redact(errText), 500)
	}
	if c.Parent != nil {
		if rest, ok := strings.CutPrefix(kind, "node."); ok {
			r.Kind = "tool." + rest // node.intent -> tool.intent, ...
		}
		r.Agent = c.Parent.Node.Name + " -> " + r.Agent
	}
	return r
}

// enqueuer is a sink that can take a record without waiting for it to be
// durable (audit.Writer).
type enqueuer interface {
	Enqueue(ctx context.Context, r *audit.Record) error
}

// write appends r; durable waits for the commit, otherwise a sink that can
// queue the record does so and returns at once.
func (k *Kernel) write(ctx context.Context, r *audit.Record, durable bool) error {
	if q, ok := k.opts.Audit.(enqueuer); ok && !durable {
		return q.Enqueue(ctx, r)
	}
	_, err := k.opts.Audit.Append(ctx, r)
	return err
}

// record writes an audit record that does not gate an action (a decision,
// a denial); a failure is logged.
func (k *Kernel) record(ctx context.Context, r *audit.Record) {
	if k.opts.Audit == nil {
		return
	}
	if err := k.write(context.WithoutCancel(ctx), r, false); err != nil {
		k.opts.Logger.Error("audit record not written", "kind", r.Kind, "err", err)
	}
}

// Record writes an operator-level audit record (kill switch, config,
// policy change) and returns the error: such actions fail closed too.
func (k *Kernel) Record(ctx context.Context, r *audit.Record) error {
	if k.opts.Audit == nil {
		return nil
	}
	_, err := k.opts.Audit.Append(context.WithoutCancel(ctx), r)
	return err
}

// KillSwitch halts all work: while engaged, no call runs and no run starts.
type KillSwitch struct {
	engaged atomic.Bool
	hooks   atomic.Pointer[[]func()]
}

// Engaged reports whether the switch is engaged.
func (s *KillSwitch) Engaged() bool { return s.engaged.Load() }

// Engage halts all work: every registered stop hook runs (runs are
// cancelled, approvals voided).
func (s *KillSwitch) Engage() {
	s.engaged.Store(true)
	if h := s.hooks.Load(); h != nil {
		for _, f := range *h {
			f()
		}
	}
}

// Release lets work start again.
func (s *KillSwitch) Release() { s.engaged.Store(false) }

// OnEngage registers f to run whenever the switch is engaged.
func (s *KillSwitch) OnEngage(f func()) {
	for {
		old := s.hooks.Load()
		var nw []func()
		if old != nil {
			nw = append(nw, *old...)
		}
		nw = append(nw, f)
		if s.hooks.CompareAndSwap(old, &nw) {
			return
		}
	}
}
