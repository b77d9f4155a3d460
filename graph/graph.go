// Package graph compiles topologies — from a YAML/JSON file or the Go
// builder — into validated, immutable graphs that package run executes.
//
// Compiling never runs an agent and never reads anything but the explicit
// file it is given.
package graph

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
)

// Barrier says when a node with several upstreams may start.
type Barrier string

const (
	BarrierAll      Barrier = "all"      // every upstream succeeded
	BarrierAny      Barrier = "any"      // the first upstream that succeeds
	BarrierKOfN     Barrier = "k_of_n"   // K upstreams succeeded
	BarrierOptional Barrier = "optional" // every upstream finished, whatever their fate
)

// Approval says when a node's call needs a human decision.
type Approval string

const (
	ApprovalRequired    Approval = "required"     // always
	ApprovalOnUntrusted Approval = "on-untrusted" // when a consequential call would act on untrusted data (default)
	ApprovalNever       Approval = "never"        // never asked; the Rule of Two still applies
)

// GateAction is what a failed gate does.
type GateAction string

const (
	GateFail  GateAction = "fail"
	GateWarn  GateAction = "warn"
	GateRetry GateAction = "retry"
)

// Graph is a compiled, validated topology. It is immutable and may be run
// many times concurrently.
type Graph struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	// Nodes in a topological order (loop back-edges aside).
	Nodes []*Node
	Roots []int
	// Tools are the graph's tool agents, callable by nodes that list them.
	Tools  []*Node
	Limits Limits
	// Sinks are the nodes nothing follows, in order: their outputs make the
	// run's.
	Sinks []int
	// MinTimeout is the shortest timeout of the graph's nodes.
	MinTimeout time.Duration
	index      map[string]int
}

// Limits a graph asks for; the runner clamps them to its ceilings.
type Limits struct {
	Deadline  time.Duration
	MaxSteps  int
	MaxTokens int
}

// Node is a compiled node.
type Node struct {
	Name  string
	Index int
	Agent agent.Agent
	// Card is the agent's card with the node's declarations applied.
	Card       agent.Card
	Upstream   []int
	Downstream []int
	Barrier    Barrier
	K          int

	Approval     Approval
	Sensitive    bool
	Trusted      bool
	AllowPrivate []string

	Timeout      time.Duration
	Retries      int
	Backoff      time.Duration
	Concurrency  int
	Sem          chan struct{} // per-node concurrency bound shared by every run; nil if unbounded
	Branch       *Branch
	Loop         *Loop
	Gate         *Gate
	LoopBody     []int // for a loop's tail: the nodes re-run on each iteration, in order
	UpstreamName []string
	// PlainJoinKeys: no upstream name reads as a credential's key (such as
	// "password" or "api_key"), so the object a join builds from redacted
	// outputs needs no redacting of its own.
	PlainJoinKeys bool
	// Tools this node may call.
	Tools []*Node
	// AgentEffects are the effects the agent itself declares; the kernel
	// refuses a call whose agent would do more than the node declared.
	AgentEffects []agent.Effect

	inputSchema *jsonschema.Schema
}

// Branch routes by the node's output.
type Branch struct {
	Path    string
	check   *Check
	Cases   map[string][]int
	Default []int
}

// Loop is a compiled back-edge.
type Loop struct {
	To    int
	Max   int
	Until *Check
}

// Gate is a compiled quality gate.
type Gate struct {
	Check   *Check
	OnFail  GateAction
	Retries int
}

// Tool returns the tool named name.
func (g *Graph) Tool(name string) (*Node, bool) {
	for _, t := range g.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Node returns the node named name.
func (g *Graph) Node(name string) (*Node, bool) {
	i, ok := g.index[name]
	if !ok {
		return nil, false
	}
	return g.Nodes[i], true
}

// Close releases what the graph's agents hold (idle connections, caches):
// every node and tool agent with a Close method is closed once.
func (g *Graph) Close() error {
	var errs []error
	seen := map[any]bool{}
	for _, n := range append(append([]*Node{}, g.Nodes...), g.Tools...) {
		if n.Agent == nil || seen[n.Agent] {
			continue
		}
		seen[n.Agent] = true
		switch c := n.Agent.(type) {
		case interface{ Close() error }:
			errs = append(errs, c.Close())
		case interface{ Close() }:
			c.Close()
		}
	}
	return errors.Join(errs...)
}
