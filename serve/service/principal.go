package service

import (
	"context"
	"net/http"
)

// Principal is who makes a request: established by a door (a bearer token
// over HTTP, the local user over stdio) and recorded on every run it starts.
type Principal struct {
	// ID names the principal, for example "token:alice" or "local:bob".
	ID string `json:"id"`
	// Kind is how it was established: "token" or "local".
	Kind string `json:"kind"`
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok && p.ID != ""
}

// Actions the service asks the Authorizer about; the resource is always a
// graph's name. They are package policy's actions, and "graph.run" is what
// the engine and the kernel check too. A principal sees only the graphs it
// may run.
const (
	ActionStartRun  = "graph.run"  // start a run of the graph (and see the graph)
	ActionReadRun   = "run.read"   // read a run of the graph, its events and output
	ActionCancelRun = "run.cancel" // cancel a run of the graph
)

// Authorizer decides whether a principal may act on a resource; an error
// denies. It has the shape of kernel.Authorizer, so the engine's policy
// plugs in as is. Ownership of runs is checked by the Service before the
// Authorizer is asked: an Authorizer can only narrow what a principal may
// do, never widen it.
type Authorizer interface {
	Authorize(ctx context.Context, principal, action, resource string) error
}

// RunAuthorizer is an optional Authorizer method for actions on runs that
// exist. With it, the Authorizer decides, ownership included (it may grant a
// principal other principals' runs, as policy's all_runs does). Without it,
// a principal reaches only the runs it started. Either way a run the
// principal may not reach is "not found".
type RunAuthorizer interface {
	AuthorizeRun(ctx context.Context, principal, action, graph, owner string) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, principal, action, resource string) error

func (f AuthorizerFunc) Authorize(ctx context.Context, p, a, r string) error { return f(ctx, p, a, r) }

// authorizeRun decides whether p may act on a run of graph started by owner.
func authorizeRun(ctx context.Context, a Authorizer, p Principal, action, graph, owner string) (err error) {
	ra, ok := a.(RunAuthorizer)
	if !ok {
		if p.ID != owner {
			return ErrNotFound
		}
		return authorize(ctx, a, p, action, graph)
	}
	if p.ID == "" {
		return &Error{Code: CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"}
	}
	defer func() {
		if recover() != nil {
			err = ErrNotFound
		}
	}()
	if ra.AuthorizeRun(ctx, p.ID, action, graph, owner) != nil || ctx.Err() != nil {
		return ErrNotFound
	}
	return nil
}

// authorize asks a, failing closed: an error, a panic or an ended context
// all deny.
func authorize(ctx context.Context, a Authorizer, p Principal, action, resource string) (err error) {
	if p.ID == "" {
		return &Error{Code: CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"}
	}
	if a == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: CodeForbidden, Status: http.StatusForbidden, Message: "not allowed", Err: errPanicked}
		}
	}()
	if aerr := a.Authorize(ctx, p.ID, action, resource); aerr != nil {
		return &Error{Code: CodeForbidden, Status: http.StatusForbidden, Message: "not allowed", Err: aerr}
	}
	if ctx.Err() != nil {
		return &Error{Code: CodeForbidden, Status: http.StatusForbidden, Message: "not allowed", Err: ctx.Err()}
	}
	return nil
}
