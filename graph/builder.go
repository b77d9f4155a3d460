package graph

import (
	"time"

	"github.com/babelagent/babel/agent"
)

// Builder assembles a graph in Go. Nodes chain in the order they are added
// unless After says otherwise.
//
//	b := graph.New("triage")
//	b.Add("clean", trim)
//	b.Add("labels", classify, graph.After("clean"))
//	g, err := b.Build(nil)
type Builder struct {
	spec   Spec
	agents map[string]agent.Agent
}

// NodeOption configures a node added with Builder.Add.
type NodeOption func(*NodeSpec)

// New starts a graph named name.
func New(name string) *Builder {
	return &Builder{spec: Spec{Name: name}, agents: map[string]agent.Agent{}}
}

// Describe sets the graph's description.
func (b *Builder) Describe(d string) *Builder { b.spec.Description = d; return b }

// Limits lowers the graph's run limits.
func (b *Builder) Limits(deadline time.Duration, maxSteps int) *Builder {
	b.spec.Limits = LimitsSpec{Deadline: Duration(deadline), MaxSteps: maxSteps}
	return b
}

// Add adds a node running a.
func (b *Builder) Add(name string, a agent.Agent, opts ...NodeOption) *Builder {
	ns := NodeSpec{Name: name}
	for _, o := range opts {
		o(&ns)
	}
	b.spec.Nodes = append(b.spec.Nodes, ns)
	b.agents[name] = a
	return b
}

// Tool adds a tool: an agent that nodes listing it (graph.Tools) may call
// through the kernel, outside the dataflow.
func (b *Builder) Tool(name string, a agent.Agent, opts ...NodeOption) *Builder {
	ns := NodeSpec{Name: name}
	for _, o := range opts {
		o(&ns)
	}
	b.spec.Tools = append(b.spec.Tools, ns)
	b.agents[name] = a
	return b
}

// Spec returns the topology built so far.
func (b *Builder) Spec() *Spec { return &b.spec }

// Build compiles the graph. Options may be nil.
func (b *Builder) Build(opts *CompileOptions) (*Graph, error) {
	o := CompileOptions{}
	if opts != nil {
		o = *opts
	}
	o.Agents = b.agents
	return Compile(&b.spec, nil, &o)
}

// After sets the node's upstreams; with no names the node is a root.
func After(names ...string) NodeOption {
	return func(n *NodeSpec) { ups := append([]string{}, names...); n.After = &ups }
}

// Join sets the barrier of a node with several upstreams (k for k_of_n).
func Join(b Barrier, k int) NodeOption {
	return func(n *NodeSpec) { n.Barrier, n.K = string(b), k }
}

// Timeout sets the node's per-attempt timeout.
func Timeout(d time.Duration) NodeOption { return func(n *NodeSpec) { n.Timeout = Duration(d) } }

// Retry retries a failing node up to max times with exponential backoff.
func Retry(max int, backoff time.Duration) NodeOption {
	return func(n *NodeSpec) { n.Retry = &RetrySpec{Max: max, Backoff: Duration(backoff)} }
}

// Routes makes the node's output (or the value at path on) choose its successors.
func Routes(on string, cases map[string][]string, def ...string) NodeOption {
	return func(n *NodeSpec) { n.Branch = &BranchSpec{On: on, Cases: cases, Default: def} }
}

// LoopBack goes back to node to, at most max times, until until holds (nil: always max).
func LoopBack(to string, max int, until *Condition) NodeOption {
	return func(n *NodeSpec) { n.Loop = &LoopSpec{To: to, Max: max, Until: until} }
}

// WithGate checks the node's output.
func WithGate(check Condition, onFail GateAction, retries int) NodeOption {
	return func(n *NodeSpec) { n.Gate = &GateSpec{Check: check, OnFail: string(onFail), Retries: retries} }
}

// Declare sets the node's effects, egress hosts and secrets.
func Declare(effects []agent.Effect, egress, secrets []string) NodeOption {
	return func(n *NodeSpec) {
		if effects != nil {
			n.Effects = []string{}
			for _, e := range effects {
				n.Effects = append(n.Effects, string(e))
			}
		}
		n.Egress, n.Secrets = egress, secrets
	}
}

// Sensitive marks the node's output sensitive.
func Sensitive() NodeOption { return func(n *NodeSpec) { n.Sensitive = true } }

// Trusted marks the node's output trusted even though it reads from outside.
func Trusted() NodeOption { return func(n *NodeSpec) { n.Trusted = true } }

// Approve sets the node's approval mode.
func Approve(a Approval) NodeOption { return func(n *NodeSpec) { n.Approval = string(a) } }

// Concurrency bounds how many calls of this node run at once across runs.
func Concurrency(n int) NodeOption { return func(s *NodeSpec) { s.Concurrency = n } }

// Tools lets the node (a planning agent such as an LLM) call the named tools.
func Tools(names ...string) NodeOption {
	return func(n *NodeSpec) { n.ToolNames = append([]string{}, names...) }
}
