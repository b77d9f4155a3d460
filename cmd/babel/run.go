package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/catalog"
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
			return e.runGraph(cmd.Context(), g, msg, deadline, asJSON)
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
	return graph.Compile(spec, catalog.Registry(nil), nil)
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

func (e *env) runGraph(parent context.Context, g *graph.Graph, in agent.Message, deadline time.Duration, asJSON bool) error {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt)
	defer stop()
	runner, err := run.NewRunner(nil)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var onEvent func(run.Event)
	if e.tty && !asJSON {
		onEvent = func(ev run.Event) {
			mu.Lock()
			defer mu.Unlock()
			printEvent(e.stderr, ev)
		}
	}
	res := runner.Run(ctx, &run.Request{Graph: g, Input: in, Principal: localPrincipal(), Deadline: deadline, OnEvent: onEvent})
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printResult(e.stdout, e.stderr, res)
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

func localPrincipal() string {
	if u := os.Getenv("USER"); u != "" {
		return "local:" + u
	}
	return "local"
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
