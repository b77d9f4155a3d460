package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// maxInput bounds --input-file and stdin.
const maxInput = 16 << 20

func (e *env) runCmd() *cobra.Command {
	var input, inputFile string
	var asJSON bool
	var deadline time.Duration
	c := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a graph",
		Long: "Run the graph in FILE. Exit 0 when it succeeds, 1 when it fails, 2 on bad input,\n" +
			"3 when a call is denied or awaits approval.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("input") && inputFile != "" {
				return badInput(errors.New("give --input or --input-file, not both"))
			}
			g, err := loadGraph(args[0])
			if err != nil {
				return badInput(err)
			}
			msg, err := e.readInput(input, inputFile)
			if err != nil {
				return badInput(err)
			}
			if deadline < 0 {
				return badInput(fmt.Errorf("--deadline %v is negative", deadline))
			}
			src, err := filepath.Abs(args[0])
			if err != nil {
				return badInput(err)
			}
			return e.runGraph(cmd.Context(), &engine.Start{Graph: g, Source: src, Input: msg, Deadline: deadline}, asJSON)
		},
	}
	c.Flags().StringVar(&input, "input", "", "input: JSON, or else text")
	c.Flags().StringVar(&inputFile, "input-file", "", "read input from a file (- for stdin)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON: {run_id, status, output, trace}")
	c.Flags().DurationVar(&deadline, "deadline", 0, "lower the run deadline")
	return c
}

func loadGraph(path string) (*graph.Graph, error) {
	spec, err := graph.LoadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return graph.Compile(spec, catalog.Registry(&catalog.Options{Dir: dir}), nil)
}

// parseInput reads s as JSON when it is a JSON object, array, number,
// boolean or quoted string, and as text otherwise.
func parseInput(s string) agent.Message {
	t := strings.TrimSpace(s)
	if t != "" && json.Valid([]byte(t)) && strings.ContainsAny(t[:1], "{[\"0123456789-tfn") {
		return agent.FromJSON(json.RawMessage(t))
	}
	return agent.Text(s)
}

func (e *env) readInput(input, file string) (agent.Message, error) {
	if file == "" {
		return parseInput(input), nil
	}
	var r io.Reader = e.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return agent.Message{}, fmt.Errorf("input file: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return agent.Message{}, fmt.Errorf("input file: %w", err)
	}
	if len(b) > maxInput {
		return agent.Message{}, fmt.Errorf("input is over the %d MiB limit", maxInput>>20)
	}
	return parseInput(string(b)), nil
}

func (e *env) runGraph(parent context.Context, start *engine.Start, asJSON bool) error {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt)
	defer stop()
	eng, err := e.open(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	start.Principal = e.principal()
	start.OnEvent = e.progress(asJSON)
	var res *run.Result
	if start.RunID != "" {
		if res, err = eng.Resume(ctx, start.RunID, start.Graph, start.OnEvent); err != nil {
			return badInput(err)
		}
	} else {
		res = eng.Run(ctx, start)
	}
	return e.report(eng, res, asJSON)
}

func (e *env) progress(asJSON bool) func(run.Event) {
	if !e.tty || asJSON {
		return nil
	}
	var mu sync.Mutex
	return func(ev run.Event) {
		mu.Lock()
		defer mu.Unlock()
		printEvent(e.stderr, ev)
	}
}

// report prints a run and turns its status into the exit code.
func (e *env) report(eng *engine.Engine, res *run.Result, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printResult(e.stdout, e.stderr, res)
		for _, id := range res.Approvals {
			if a, err := eng.Store.Approval(context.Background(), id); err == nil {
				fmt.Fprintf(e.stderr, "\nawaiting approval %s: node %s (%s)\n  reason: %s\n  see it:  babel approvals show %s\n  approve: babel approvals approve %s --digest %s\n",
					a.ID, a.Node, a.Adapter, a.Reason, a.ID, a.ID, a.Digest)
			}
		}
	}
	switch res.Status {
	case run.StatusSucceeded:
		return nil
	case run.StatusDenied, run.StatusAwaitingApproval:
		return &exitError{code: exitDenied}
	default:
		return &exitError{code: exitFailed}
	}
}

func printEvent(w io.Writer, ev run.Event) {
	switch ev.Type {
	case run.EventNodeStarted:
		fmt.Fprintf(w, "  … %s\n", ev.Node)
	case run.EventNodeFinished:
		fmt.Fprintf(w, "  ✓ %s (%.1f ms)\n", ev.Node, ev.DurationMS)
	case run.EventNodeFailed:
		fmt.Fprintf(w, "  ✗ %s: %s\n", ev.Node, ev.Error)
	case run.EventNodeSkipped:
		fmt.Fprintf(w, "  - %s skipped\n", ev.Node)
	}
}

func printResult(out, errw io.Writer, res *run.Result) {
	fmt.Fprintf(errw, "run %s: %s (%d steps)\n", res.RunID, res.Status, res.Steps)
	for _, t := range res.Trace {
		line := fmt.Sprintf("  %-10s %-18s %8.2f ms", t.Status, t.Node, t.DurationMS)
		if t.Attempts > 1 {
			line += fmt.Sprintf("  attempts=%d", t.Attempts)
		}
		if t.Iterations > 1 {
			line += fmt.Sprintf("  iterations=%d", t.Iterations)
		}
		if t.Route != "" {
			line += "  route=" + t.Route
		}
		if t.Error != "" {
			line += "  error: " + t.Error
		}
		for _, w := range t.Warnings {
			line += "  warning: " + w
		}
		fmt.Fprintln(errw, line)
	}
	if res.Error != "" {
		fmt.Fprintln(errw, "error:", res.Error)
	}
	if res.Status == run.StatusSucceeded {
		v, err := res.Output.Value()
		switch {
		case err != nil:
		case len(res.Output.Parts) == 1 && res.Output.Parts[0].Kind == agent.PartText:
			fmt.Fprintln(out, res.Output.Text())
		default:
			fmt.Fprintln(out, string(v))
		}
	}
}
