package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/graph"
)

func (e *env) validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a topology; every problem is named with its node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := loadGraph(args[0])
			if err != nil {
				return badInput(err)
			}
			fmt.Fprintf(e.stdout, "%s: ok (%d nodes)\n", g.Name, len(g.Nodes))
			return nil
		},
	}
}

// inspectNode is one node in `babel inspect` output.
type inspectNode struct {
	Name         string          `json:"name"`
	Kind         string          `json:"kind"`
	Agent        string          `json:"agent"`
	After        []string        `json:"after"`
	Barrier      string          `json:"barrier,omitempty"`
	K            int             `json:"k,omitempty"`
	Effects      []string        `json:"effects"`
	Egress       []string        `json:"egress"`
	AllowPrivate []string        `json:"allow_private"`
	Secrets      []string        `json:"secrets"`
	Approval     string          `json:"approval"`
	Sensitive    bool            `json:"sensitive,omitempty"`
	Trusted      bool            `json:"trusted,omitempty"`
	ReadsOutside bool            `json:"reads_outside,omitempty"`
	Timeout      string          `json:"timeout"`
	Retries      int             `json:"retries,omitempty"`
	Branch       map[string]any  `json:"branch,omitempty"`
	Loop         map[string]any  `json:"loop,omitempty"`
	Gate         map[string]any  `json:"gate,omitempty"`
	Tools        []string        `json:"tools,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
}

func (e *env) inspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print the compiled topology as JSON, with its Rule-of-Two table",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := loadGraph(args[0])
			if err != nil {
				return badInput(err)
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(inspect(g))
		},
	}
}

func inspect(g *graph.Graph) map[string]any {
	nodes := describe(g, g.Nodes)
	tools := describe(g, g.Tools)
	return map[string]any{
		"name": g.Name, "description": g.Description, "input_schema": g.InputSchema,
		"limits": map[string]any{"deadline": durOrNil(g.Limits.Deadline), "max_steps": g.Limits.MaxSteps, "max_tokens": g.Limits.MaxTokens},
		"nodes":  nodes, "tools": tools, "rule_of_two": g.RuleOfTwo(),
	}
}

func describe(g *graph.Graph, list []*graph.Node) []inspectNode {
	nodes := make([]inspectNode, 0, len(list))
	for _, n := range list {
		in := inspectNode{
			Name: n.Name, Kind: n.Card.Kind, Agent: n.Card.Name, After: names(g, n.Upstream),
			Effects: []string{}, Egress: nonNil(n.Card.Egress), AllowPrivate: nonNil(n.AllowPrivate),
			Secrets: nonNil(n.Card.Secrets), Approval: string(n.Approval), Sensitive: n.Sensitive,
			Trusted: n.Trusted, ReadsOutside: n.Card.ReadsOutside, Timeout: n.Timeout.String(),
			Retries: n.Retries, InputSchema: n.Card.InputSchema,
		}
		for _, ef := range n.Card.Effects {
			in.Effects = append(in.Effects, string(ef))
		}
		if len(n.Upstream) > 1 {
			in.Barrier, in.K = string(n.Barrier), n.K
		}
		if b := n.Branch; b != nil {
			cases := map[string][]string{}
			for k, v := range b.Cases {
				cases[k] = names(g, v)
			}
			in.Branch = map[string]any{"on": b.Path, "cases": cases, "default": names(g, b.Default)}
		}
		if l := n.Loop; l != nil {
			in.Loop = map[string]any{"to": g.Nodes[l.To].Name, "max": l.Max, "body": names(g, n.LoopBody)}
		}
		if gt := n.Gate; gt != nil {
			in.Gate = map[string]any{"on_fail": gt.OnFail, "retries": gt.Retries}
		}
		for _, t := range n.Tools {
			in.Tools = append(in.Tools, t.Name)
		}
		nodes = append(nodes, in)
	}
	return nodes
}

func durOrNil(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.String()
}

func names(g *graph.Graph, idx []int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, g.Nodes[i].Name)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
