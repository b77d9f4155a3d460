package serve

import (
	"context"
	"io"
	"log/slog"

	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/serve/mcpserver"
	"github.com/babelagent/babel/serve/service"
)

// StdioOptions configures ServeStdio. Nil means the defaults.
type StdioOptions struct {
	// Principal is who every call is made as: the process owner (default "local").
	Principal string
	// Executor runs the graphs; nil means a run.Runner over Kernel.
	Executor service.Executor
	// Kernel runs every node when Executor is nil; nil means kernel.New(nil).
	Kernel *kernel.Kernel
	// Authorizer and Redactor as in Options.
	Authorizer service.Authorizer
	Redactor   service.Redactor
	// Config supplies the run limits (deadline, concurrency, rate, output
	// caps); its HTTP fields are ignored.
	Config *Config
	// Logger receives errors; never stdout, which carries the protocol.
	Logger  *slog.Logger
	Version string
}

// ServeStdio serves graphs as MCP tools over in and out (`babel mcp`) until
// the peer closes in or ctx ends. Runs take the same path, with the same
// limits, as over HTTP.
func ServeStdio(ctx context.Context, graphs []*graph.Graph, in io.ReadCloser, out io.WriteCloser, opts *StdioOptions) error {
	o := StdioOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Principal == "" {
		o.Principal = "local"
	}
	cfg := Config{}
	if o.Config != nil {
		cfg = *o.Config
	}
	cfg = cfg.withDefaults()
	svc, err := service.New(graphs, &service.Options{
		Executor: o.Executor, Kernel: o.Kernel, Authorizer: o.Authorizer, Redactor: o.Redactor, RunDeadline: cfg.RunDeadline.D(), MaxConcurrentRuns: cfg.MaxConcurrentRuns,
		Rate: cfg.RatePerPrincipal, Burst: cfg.Burst, History: cfg.History,
		MaxOutputBytes: cfg.MaxOutputBytes, MaxOutputDepth: cfg.MaxOutputDepth, Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	defer svc.Close(context.Background())
	p := service.Principal{ID: o.Principal, Kind: "local"}
	srv := mcpserver.New(svc, &mcpserver.Options{Local: &p, Version: o.Version, Logger: o.Logger})
	return mcpserver.ServeStdio(ctx, srv, in, out)
}
