package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/serve"
	"github.com/babelagent/babel/serve/admin"
	"github.com/babelagent/babel/serve/approvals"
	"github.com/babelagent/babel/serve/service"
	"github.com/babelagent/babel/store"
)

// serveCmd is `babel serve`: REST, MCP and A2A over one hardened HTTP
// server, loopback and zero-config by default. Runs go through the engine
// (store, audit, approvals, scoped secrets).
func (e *env) serveCmd() *cobra.Command {
	var listen, tokenFile string
	c := &cobra.Command{
		Use:   "serve [--config FILE] [--listen ADDR] [--token-file F] GRAPH...",
		Short: "Serve graphs over REST (/v1), MCP (/mcp) and A2A (/a2a)",
		Long: "Serve the graphs in the given topology files, and only those. The server listens on " + serve.DefaultListen + "\n" +
			"by default and then needs no token; any other address needs --token-file (lines of \"PRINCIPAL TOKEN\",\n" +
			"mode 600). Server settings are the \"serve:\" section of --config. Nothing is read from the working\n" +
			"directory unless its path is given.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := e.serveConfig()
			if err != nil {
				return err
			}
			if listen != "" {
				cfg.Listen = listen
			}
			if tokenFile != "" {
				cfg.TokenFile = tokenFile
			}
			var tokens *serve.Tokens
			if cfg.TokenFile != "" {
				t, err := serve.LoadTokens(cfg.TokenFile)
				if err != nil {
					return badInput(err)
				}
				tokens = t
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			eng, graphs, x, err := e.openForServe(ctx, args, tokens)
			if err != nil {
				return err
			}
			defer eng.Close()
			resume := &lateStarter{}
			srv, err := serve.New(graphs, cfg, &serve.Options{Tokens: tokens, LocalPrincipal: e.principal(),
				Executor: x, Authorizer: eng, Redactor: eng.Redactor, Logger: eng.Logger, Version: version(),
				Approvals: approvalsHandler(eng, resume),
				Kill:      admin.KillHandler(eng, func(err error) bool { return errors.Is(err, engine.ErrForbidden) }, eng.Logger)})
			if err != nil {
				return badInput(err)
			}
			resume.svc = srv.Service()
			ln, err := srv.Listen(ctx)
			if err != nil {
				return badInput(err)
			}
			fmt.Fprintf(e.stderr, "babel: serving %d graph(s) on http://%s — REST /v1, MCP /mcp, A2A /a2a (Ctrl-C stops)\n", len(graphs), ln.Addr())
			if err := srv.Serve(ctx, ln); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return nil
		},
	}
	c.Flags().StringVar(&listen, "listen", "", "address to listen on (default "+serve.DefaultListen+"); not loopback needs --token-file")
	c.Flags().StringVar(&tokenFile, "token-file", "", "bearer tokens, one \"PRINCIPAL TOKEN\" per line (mode 600)")
	return c
}

// mcpCmd is `babel mcp`: graphs as MCP tools over stdio, run as the local user.
func (e *env) mcpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp [--config FILE] GRAPH...",
		Short: "Serve graphs as MCP tools over stdio",
		Long: "Serve the graphs in the given topology files as MCP tools over stdin and stdout, as the local user.\n" +
			"Run limits are the \"serve:\" section of --config.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := e.serveConfig()
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			eng, graphs, x, err := e.openForServe(ctx, args, nil)
			if err != nil {
				return err
			}
			defer eng.Close()
			err = serve.ServeStdio(ctx, graphs, io.NopCloser(e.stdin), nopWriteCloser{e.stdout}, &serve.StdioOptions{
				Principal: e.principal(), Executor: x, Authorizer: eng, Redactor: eng.Redactor, Config: cfg,
				Logger: eng.Logger, Version: version()})
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return nil
		},
	}
}

// serveConfig reads the "serve:" section of --config (defaults without one).
func (e *env) serveConfig() (*serve.Config, error) {
	if e.configPath == "" {
		return &serve.Config{}, nil
	}
	c, err := serve.LoadConfig(e.configPath)
	if err != nil {
		return nil, badInput(err)
	}
	return c, nil
}

// openForServe opens the engine and loads the graphs at paths. With
// tokens and no policy file, the policy lets each token's principal list
// and run the served graphs and read and cancel its own runs; the local
// user may do anything; nobody else anything.
func (e *env) openForServe(ctx context.Context, paths []string, tokens *serve.Tokens) (*engine.Engine, []*graph.Graph, service.Executor, error) {
	cfg, err := engine.LoadConfig(e.configPath, e.environ)
	if err != nil {
		return nil, nil, nil, badInput(err)
	}
	// Errors (with their correlation ids) and refusals go to stderr, through
	// the engine's redacting handler.
	opts := &engine.Options{Environ: e.environ, Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	pol := &servePolicy{local: e.principal(), callers: map[string]bool{}, graphs: map[string]bool{}}
	if tokens.Len() > 0 && cfg.PolicyFile == "" {
		for _, p := range tokens.Principals() {
			pol.callers[p] = true
		}
		opts.Authorizer = pol
	}
	eng, err := engine.Open(ctx, cfg, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	x := &engineExecutor{eng: eng, sources: map[string]string{}}
	var graphs []*graph.Graph
	for _, p := range paths {
		g, err := eng.Load(p)
		if err != nil {
			eng.Close()
			return nil, nil, nil, badInput(err)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			eng.Close()
			return nil, nil, nil, badInput(err)
		}
		graphs = append(graphs, g)
		x.sources[g.Name] = abs
		pol.graphs[g.Name] = true
	}
	return eng, graphs, x, nil
}

// servePolicy is the zero-config policy of a server with tokens.
type servePolicy struct {
	local   string
	callers map[string]bool
	graphs  map[string]bool
}

func (p *servePolicy) Authorize(_ context.Context, principal, action, resource string) error {
	if principal == p.local {
		return nil
	}
	if p.callers[principal] {
		switch action {
		case service.ActionStartRun:
			if p.graphs[resource] {
				return nil
			}
		case service.ActionReadRun, service.ActionCancelRun:
			return nil // the service shows a principal only its own runs
		}
	}
	return fmt.Errorf("principal %q may not %s %s", principal, action, resource)
}

// engineExecutor runs the served graphs through the engine, so every run
// is stored and audited, and a paused run can be resumed.
type engineExecutor struct {
	eng     *engine.Engine
	sources map[string]string
}

func (x *engineExecutor) Execute(ctx context.Context, ex *service.Execution) *run.Result {
	if ex.Resume {
		res, err := x.eng.Resume(ctx, ex.RunID, ex.Graph, ex.OnEvent)
		if err != nil {
			now := time.Now()
			return &run.Result{RunID: ex.RunID, Graph: ex.Graph.Name, Principal: ex.Principal, Status: run.StatusFailed,
				Error: "resume: " + err.Error(), StartedAt: now, FinishedAt: now}
		}
		return res
	}
	return x.eng.Run(ctx, &engine.Start{Graph: ex.Graph, Source: x.sources[ex.Graph.Name], Input: ex.Input,
		Principal: ex.Principal, RunID: ex.RunID, Deadline: ex.Deadline, OnEvent: ex.OnEvent})
}

// lateStarter lets the approvals door resume runs through the service,
// which exists only once the server is built.
type lateStarter struct{ svc *service.Service }

func (l *lateStarter) Start(ctx context.Context, p service.Principal, req *service.StartRequest) (string, error) {
	return l.svc.Start(ctx, p, req)
}

func approvalsHandler(eng *engine.Engine, s approvals.Starter) http.Handler {
	return approvals.New(eng, s, &approvals.Options{
		Logger: eng.Logger,
		IsNotFound: func(err error) bool {
			return errors.Is(err, kernel.ErrNoSuchApproval) || errors.Is(err, store.ErrNotFound)
		},
		IsForbidden: func(err error) bool { return errors.Is(err, engine.ErrForbidden) },
		IsConflict:  func(err error) bool { return errors.Is(err, kernel.ErrStale) || errors.Is(err, kernel.ErrNotPending) },
	})
}

func (x *engineExecutor) Cancel(ctx context.Context, runID string) bool {
	return x.eng.Cancel(ctx, runID)
}

func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// version is the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
