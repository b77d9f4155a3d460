package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/cmd/babel/demo"
	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/graph"
)

func (e *env) demoCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run an offline example: fan-out, a branch, a join and a gate (no key, no network)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := graph.Parse(demo.Triage)
			if err != nil {
				return err
			}
			g, err := graph.Compile(spec, catalog.Registry(nil), nil)
			if err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(e.stderr, "demo: %s\n  %s\n  input: %q\n\n", g.Name, g.Description, demo.TriageInput)
			}
			return e.runGraph(cmd.Context(), &engine.Start{Graph: g, Input: agent.Text(demo.TriageInput)}, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return c
}
