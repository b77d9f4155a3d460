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

// Actions the service asks the Authorizer about. "graph.run" with the
// graph's name is the action the engine and the kernel check too.
const (
	ActionListGraphs = "graph.list" // resource "*"
	ActionStartRun   = "graph.run"  // resource: the graph's name
	ActionReadRun    = "run.read"   // resource: the run id ("*" to list)
	ActionCancelRun  = "run.cancel" // resource: the run id
)

// Authorizer decides whether a principal may act on a resource; an error
// denies. It has the shape of kernel.Authorizer, so the engine's policy
// plugs in as is. Ownership of runs is checked by the Service before the
// Authorizer is asked: an Authorizer can only narrow what a principal may
// do, never widen it.
type Authorizer interface {
	Authorize(ctx context.Context, principal, action, resource string) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, principal, action, resource string) error

func (f AuthorizerFunc) Authorize(ctx context.Context, p, a, r string) error { return f(ctx, p, a, r) }

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
