package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/engine"
)

// env is what every command may touch: its streams. Nothing is read from
// the working directory unless a command is given a path.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	environ        []string
	configPath     string
}

func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return executeContext(context.Background(), args, stdin, stdout, stderr)
}

// executeContext runs the CLI; cancelling ctx stops a long command (serve).
func executeContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, tty: isTTY(stderr), environ: os.Environ()}
	root := &cobra.Command{
		Use:           "babel",
		Short:         "Babelagent: one common tongue for agents, and a runtime safe to point at untrusted input",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	root.PersistentFlags().StringVar(&e.configPath, "config", "", "operator configuration file (nothing is read from the working directory)")
	root.AddCommand(
		e.runCmd(), e.validateCmd(), e.inspectCmd(), e.demoCmd(), e.doctorCmd(), e.versionCmd(),
		e.approvalsCmd(), e.runsCmd(), e.auditCmd(), e.killCmd(), e.postureCmd(), e.serveCmd(), e.mcpCmd(),
	)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "babel:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "babel:", err)
	return exitBadInput // unknown command, bad flag, wrong argument count
}

func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			fmt.Fprintln(e.stdout, "babel", v)
			return nil
		},
	}
}

// open builds the engine from --config (or the defaults) for commands that
// run graphs or touch the store.
func (e *env) open(ctx context.Context) (*engine.Engine, error) {
	cfg, err := engine.LoadConfig(e.configPath, e.environ)
	if err != nil {
		return nil, badInput(err)
	}
	eng, err := engine.Open(ctx, cfg, &engine.Options{Environ: e.environ})
	if err != nil {
		if strings.Contains(err.Error(), "already open by another writer") {
			err = fmt.Errorf("%w (a running `babel serve` holds it: use its REST API, or stop it first)", err)
		}
		return nil, &exitError{code: exitFailed, err: err}
	}
	return eng, nil
}

func (e *env) principal() string { return engine.LocalPrincipal(e.environ) }
