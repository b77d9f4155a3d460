package openapi

import (
	"errors"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// Register adds the kind "openapi" to r:
//
//	agent: {openapi: {spec: ./tickets.yaml, operation: createTicket}}
//	agent: {openapi: {spec: "https://api.example.com/openapi.json", operation: getTicket, digest: "sha256:…"}}
//
// opts may be nil; a catalog sets opts.Dir to the topology file's directory.
func Register(r *graph.Registry, opts *Options) {
	if opts == nil {
		opts = &Options{}
	}
	r.Register("openapi", func(ref graph.Ref) (agent.Agent, error) { return FromRef(ref, opts) })
}

// FromRef builds the agent a topology node refers to.
func FromRef(ref graph.Ref, opts *Options) (agent.Agent, error) {
	if opts == nil {
		opts = &Options{}
	}
	if ref.Target != "" {
		return nil, errors.New("write openapi settings as a map: {openapi: {spec: ..., operation: ...}}")
	}
	var cfg Config
	if err := httpadapter.DecodeConfig(ref.Config, &cfg); err != nil {
		return nil, err
	}
	return build(cfg, opts, ref.Node)
}
