// Package topotest compiles the topologies tests write inline.
package topotest

import (
	"strings"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// Compile parses topology and compiles it with reg; agents supplies
// ready-made agents (Go tools) by name. A topology that does not parse
// fails the test. The graph's agents are closed when the test ends.
func Compile(t testing.TB, reg *graph.Registry, topology string, agents map[string]agent.Agent) (*graph.Graph, error) {
	t.Helper()
	spec, err := graph.Parse([]byte(topology))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, topology)
	}
	g, err := graph.Compile(spec, reg, &graph.CompileOptions{Agents: agents})
	if err == nil {
		t.Cleanup(func() {
			for _, n := range append(append([]*graph.Node{}, g.Nodes...), g.Tools...) {
				if c, ok := n.Agent.(interface{ Close() error }); ok {
					_ = c.Close()
				}
			}
		})
	}
	return g, err
}

// MustCompile is Compile without Go agents, failing the test on an error.
func MustCompile(t testing.TB, reg *graph.Registry, topology string) *graph.Graph {
	t.Helper()
	g, err := Compile(t, reg, topology, nil)
	if err != nil {
		t.Fatalf("compile: %v\n%s", err, topology)
	}
	return g
}

// OneNode is a topology of one node named node; agentField is its agent
// (YAML), extra more of its keys, each indented as the node's.
func OneNode(node, agentField string, extra ...string) string {
	var b strings.Builder
	b.WriteString("name: t\nnodes:\n  - name: " + node + "\n    agent: " + agentField + "\n")
	for _, e := range extra {
		b.WriteString("    " + e + "\n")
	}
	return b.String()
}
