package agent

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/babelagent/babel/secrets"
)

// callCtxKey holds the one *CallContext of the current call: every setter
// below derives a new one, so the innermost call's view wins whole.
type callCtxKey struct{}

// CallContext is everything the kernel hands one call: who and what the
// call is, the secrets it may use, what it may spend, and the tools it may
// call. A call sees its own CallContext only, never its caller's.
type CallContext struct {
	Info    CallInfo
	Secrets *Secrets
	Meter   Meter
	Tools   Tools
	hasInfo bool
}

// WithCall returns ctx carrying a copy of cc for the call it is passed to:
// nothing of an enclosing call (its secrets, its tools) shows through.
func WithCall(ctx context.Context, cc *CallContext) context.Context {
	return new(CallScope).Bind(ctx, cc)
}

// CallScope is a context carrying one CallContext: what WithCall returns,
// made in place, so that the kernel allocates it with what it keeps of the
// call it belongs to. Bind (or BindFrom) each CallScope once.
type CallScope struct {
	context.Context
	src CallSource                  // makes cc when it is first asked for
	cc  atomic.Pointer[CallContext] // nil until then
}

// CallSource makes the CallContext of a call. The kernel binds a call's
// scope to it, so that a call whose agent never looks at its CallContext
// (most pure-compute agents) costs none. Goroutines of the call that look
// at the same moment may each ask; one answer is kept. CallContext must
// give the same answer each time.
type CallSource interface {
	CallContext() CallContext
}

// Bind makes s carry a copy of cc over parent and returns it.
func (s *CallScope) Bind(parent context.Context, cc *CallContext) context.Context {
	c := *cc
	c.hasInfo = true
	s.Context = parent
	s.cc.Store(&c)
	return s
}

// BindFrom makes s carry over parent the CallContext src makes, which it
// asks for when the call first looks, and returns it.
func (s *CallScope) BindFrom(parent context.Context, src CallSource) context.Context {
	s.Context, s.src = parent, src
	return s
}

func (s *CallScope) Value(key any) any {
	if key == (callCtxKey{}) {
		return s.callContext()
	}
	return s.Context.Value(key)
}

func (s *CallScope) callContext() *CallContext {
	if c := s.cc.Load(); c != nil {
		return c
	}
	c := s.src.CallContext()
	c.hasInfo = true
	if s.cc.CompareAndSwap(nil, &c) {
		return &c
	}
	return s.cc.Load()
}

func (s *CallScope) String() string { return "agent.WithCall" }

func current(ctx context.Context) *CallContext {
	cc, _ := ctx.Value(callCtxKey{}).(*CallContext)
	return cc
}

func derive(ctx context.Context, f func(*CallContext)) context.Context {
	var n CallContext
	if c := current(ctx); c != nil {
		n = *c
	}
	f(&n)
	s := &CallScope{Context: ctx}
	s.cc.Store(&n)
	return s
}

// Secrets is the set of secrets one call may use: exactly those its node
// declared. The kernel builds it for each call; an agent reads it with
// SecretsFrom. It is never shared between calls.
type Secrets struct{ m map[string]secrets.Secret }

// NewSecrets returns a set holding ss.
func NewSecrets(ss ...secrets.Secret) *Secrets {
	m := make(map[string]secrets.Secret, len(ss))
	for _, s := range ss {
		m[s.Name()] = s
	}
	return &Secrets{m: m}
}

// Get returns the secret named name, if the call was given it.
func (s *Secrets) Get(name string) (secrets.Secret, bool) {
	if s == nil {
		return secrets.Secret{}, false
	}
	v, ok := s.m[name]
	return v, ok
}

// Names lists the names of the secrets in the set.
func (s *Secrets) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k)
	}
	return out
}

// WithSecrets returns ctx carrying ss for the agent call it is passed to.
func WithSecrets(ctx context.Context, ss *Secrets) context.Context {
	return derive(ctx, func(c *CallContext) { c.Secrets = ss })
}

// SecretsFrom returns the secrets of the current call (never nil).
func SecretsFrom(ctx context.Context) *Secrets {
	if c := current(ctx); c != nil && c.Secrets != nil {
		return c.Secrets
	}
	return &Secrets{}
}

// CallInfo describes the call an agent is serving; set by the kernel.
type CallInfo struct {
	RunID     string
	Node      string
	Principal string
	Attempt   int
	// Effects are the effects the node declared: all this call may do.
	Effects []Effect
}

// WithCallInfo returns ctx carrying ci.
func WithCallInfo(ctx context.Context, ci *CallInfo) context.Context {
	return derive(ctx, func(c *CallContext) { c.Info, c.hasInfo = *ci, true })
}

// CallInfoFrom returns the current call's description, or nil outside a call.
func CallInfoFrom(ctx context.Context) *CallInfo {
	if c := current(ctx); c != nil && c.hasInfo {
		return &c.Info
	}
	return nil
}

// Permit returns an error unless the current call declared effect e. An
// adapter calls it before acting, so an undeclared effect is refused at run
// time whatever the agent was built to do. Outside a kernel call everything
// is refused.
func Permit(ctx context.Context, e Effect) error {
	ci := CallInfoFrom(ctx)
	if ci == nil {
		return &EffectError{Effect: e}
	}
	for _, d := range ci.Effects {
		if d == e {
			return nil
		}
	}
	return &EffectError{Node: ci.Node, Effect: e}
}

// EffectError refuses an effect the node did not declare. Retrying cannot
// help.
type EffectError struct {
	Node   string
	Effect Effect
}

func (e *EffectError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("effect %s refused: not inside a kernel call", e.Effect)
	}
	return fmt.Sprintf("node %s: effect %s refused: the node does not declare it", e.Node, e.Effect)
}

// Retryable is false: the declaration will not change between attempts.
func (e *EffectError) Retryable() bool { return false }
