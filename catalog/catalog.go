// Package catalog assembles the registry of every agent kind Babelagent
// knows: builtins, and the adapters for bringing your own agent.
package catalog

import (
	"context"

	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
)

// Options configures the kinds. Nil means the defaults.
type Options struct{}

// Registry returns a registry holding every kind.
func Registry(opts *Options) *graph.Registry {
	r := graph.NewRegistry()
	builtin.Register(r)
	return r
}

// Check is one line of `babel doctor`.
type Check struct {
	Family string `json:"family"` // adapter, sandbox, store
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Doctor reports which kinds are usable on this machine, and why not.
func Doctor(ctx context.Context) []Check {
	return []Check{
		{Family: "adapter", Name: "builtin", OK: true, Detail: "trim, upper, lower, echo, merge, template, jsonpath, sleep, fail"},
		{Family: "adapter", Name: "fn", OK: true, Detail: "typed Go functions (agent.Func)"},
	}
}
