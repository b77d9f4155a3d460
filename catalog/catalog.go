// Package catalog assembles the registry of every agent kind Babelagent
// knows: builtins, and the adapters for bringing your own agent.
package catalog

import (
	"context"
	"os/exec"

	"github.com/babelagent/babel/adapter/a2a"
	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/adapter/mcp"
	"github.com/babelagent/babel/adapter/openapi"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
)

// Options configures the kinds. Nil means the defaults.
type Options struct {
	// Dir is the directory of the topology file being compiled: relative
	// paths in it (an OpenAPI document) resolve there, never against the
	// process's working directory.
	Dir string
}

// Registry returns a registry holding every kind.
func Registry(opts *Options) *graph.Registry {
	if opts == nil {
		opts = &Options{}
	}
	r := graph.NewRegistry()
	builtin.Register(r)
	httpadapter.Register(r, nil)
	openapi.Register(r, &openapi.Options{Dir: opts.Dir})
	mcp.Register(r, nil)
	a2a.Register(r, nil)
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
	checks := []Check{
		{Family: "adapter", Name: "builtin", OK: true, Detail: "trim, upper, lower, echo, merge, template, jsonpath, sleep, fail"},
		{Family: "adapter", Name: "fn", OK: true, Detail: "typed Go functions (agent.Func)"},
		{Family: "adapter", Name: "http", OK: true, Detail: "JSON/text endpoints through the egress guard"},
		{Family: "adapter", Name: "openapi", OK: true, Detail: "one operation of an OpenAPI 3.x document; arguments validated before any request; pin with digest:"},
		{Family: "adapter", Name: "mcp", OK: true, Detail: "MCP tools over streamable HTTP; tool lists pinned by digest (pin: is required)"},
		{Family: "adapter", Name: "a2a", OK: true, Detail: "A2A 1.0 agents (JSON-RPC): send, stream, poll, cancel"},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		checks = append(checks, Check{Family: "adapter", Name: "mcp+stdio", OK: true, Detail: "stdio MCP servers as subprocesses with an explicit minimal environment"})
	} else {
		checks = append(checks, Check{Family: "adapter", Name: "mcp+stdio", OK: true, Detail: "stdio MCP servers as subprocesses with an explicit minimal environment (bubblewrap not found: not confined)"})
	}
	return checks
}
