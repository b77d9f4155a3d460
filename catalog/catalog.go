// Package catalog assembles the registry of every agent kind Babelagent
// knows: builtins, the adapters for bringing your own agent, and code and
// programs run in a sandbox.
//
// What this package must never do: resolve a path in a topology against
// the process's working directory (a relative path resolves against
// Options.Dir, the topology's directory, or is an error), or build an
// agent that runs code, a program or a stdio MCP server anywhere but in a
// sandbox.
package catalog

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/babelagent/babel/adapter/a2a"
	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/adapter/llm"
	"github.com/babelagent/babel/adapter/llm/anthropic"
	"github.com/babelagent/babel/adapter/llm/openai"
	"github.com/babelagent/babel/adapter/mcp"
	"github.com/babelagent/babel/adapter/openapi"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/sandbox"
)

// Options configures the kinds. Nil means the defaults.
type Options struct {
	// Dir is the directory of the topology file being compiled: relative
	// paths in it (an OpenAPI document, a code node's file) resolve there,
	// never against the process's working directory.
	Dir string
	// Sandboxes runs code nodes, process nodes and stdio MCP servers. Share
	// one across registries (a process should hold one): its Wasm runtime
	// compiles QuickJS once. A nil member is a kind that is unavailable, and
	// nodes needing it fail closed. Nil means sandboxes made for this
	// registry when a node first needs them (the os sandbox with
	// sandbox.NewOS(nil), the wasm one with sandbox.NewWasm); they are never
	// closed, and live as long as the agents built with them.
	Sandboxes *sandbox.Sandboxes
	// Shared, when Sandboxes is nil, is the lazily made set to use (see
	// NewShared); nil means a set of this registry's own.
	Shared *Shared
}

// Registry returns a registry holding every kind. It starts nothing: the
// sandboxes are made when a node first needs them.
func Registry(opts *Options) *graph.Registry {
	if opts == nil {
		opts = &Options{}
	}
	dir, sbs := opts.Dir, &lazySandboxes{given: opts.Sandboxes}
	if opts.Shared != nil && opts.Sandboxes == nil {
		sbs = opts.Shared.lazy
	}
	r := graph.NewRegistry()
	builtin.Register(r)
	httpadapter.Register(r, nil)
	openapi.Register(r, &openapi.Options{Dir: dir})
	mcp.Register(r, &mcp.Options{Starter: &sandboxStarter{sbs: sbs}})
	a2a.Register(r, nil)
	llm.Register(r, &llm.Options{Providers: []llm.Provider{openai.Provider(), openai.Ollama(), anthropic.Provider()}})
	r.Register(KindCode, func(ref graph.Ref) (agent.Agent, error) { return codeAgent(ref, dir, sbs) })
	r.Register(KindProcess, func(ref graph.Ref) (agent.Agent, error) { return processAgent(ref, dir, sbs) })
	return r
}

// Shared is one set of sandboxes, made on first use, that many registries
// (one per topology file) share: a process compiles QuickJS once. Close
// releases the WebAssembly runtime.
type Shared struct{ lazy *lazySandboxes }

// NewShared returns an empty shared set.
func NewShared() *Shared { return &Shared{lazy: &lazySandboxes{}} }

// Close releases what the set made.
func (s *Shared) Close(ctx context.Context) error {
	s.lazy.mu.Lock()
	defer s.lazy.mu.Unlock()
	if s.lazy.wasm != nil {
		return s.lazy.wasm.Close(ctx)
	}
	return nil
}

// lazySandboxes hands out the registry's sandboxes, making each kind on
// first use when none were given.
type lazySandboxes struct {
	given *sandbox.Sandboxes

	mu   sync.Mutex
	wasm *sandbox.Wasm
	os   *sandbox.OS
}

// forKind returns Sandboxes holding the sandbox of kind k.
func (l *lazySandboxes) forKind(k sandbox.Kind) (*sandbox.Sandboxes, error) {
	if l.given != nil {
		return l.given, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	switch k {
	case sandbox.KindWasm:
		if l.wasm == nil {
			// Not the caller's context: the runtime outlives the call that
			// first needed it.
			l.wasm, err = sandbox.NewWasm(context.Background(), nil)
		}
		return &sandbox.Sandboxes{Wasm: l.wasm}, err
	case sandbox.KindOS:
		if l.os == nil {
			l.os, err = sandbox.NewOS(nil)
		}
		return &sandbox.Sandboxes{OS: l.os}, err
	}
	return &sandbox.Sandboxes{}, nil
}

// osSandbox returns the registry's os sandbox, or the *sandbox.SetupError
// that says there is none.
func (l *lazySandboxes) osSandbox() (*sandbox.OS, error) {
	sbs, err := l.forKind(sandbox.KindOS)
	if err != nil {
		return nil, err
	}
	sb, err := sbs.For(sandbox.KindOS)
	if err != nil {
		return nil, err
	}
	return sb.(*sandbox.OS), nil
}

// sandboxStarter starts stdio MCP servers in the registry's os sandbox.
type sandboxStarter struct{ sbs *lazySandboxes }

func (s *sandboxStarter) Start(ctx context.Context, cmd *mcp.Command) (io.ReadWriteCloser, error) {
	o, err := s.sbs.osSandbox()
	if err != nil {
		return nil, fmt.Errorf("stdio MCP servers run only in the os sandbox: %w", err)
	}
	return (&mcp.SandboxStarter{OS: o}).Start(ctx, cmd)
}
