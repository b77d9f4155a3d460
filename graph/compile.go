package graph

import (
	"encoding/json"
	"fmt"
	"github.com/babelagent/babel/secrets"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/babelagent/babel/agent"
)

// Problem is one thing wrong with a topology.
type Problem struct {
	Node  string `json:"node,omitempty"`
	Field string `json:"field,omitempty"`
	Msg   string `json:"problem"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Node != "" {
		fmt.Fprintf(&b, "node %q: ", p.Node)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, "%s: ", p.Field)
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ValidationError lists every problem found in one pass.
type ValidationError struct {
	Graph    string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	name := e.Graph
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(&b, "graph %s: %d problem(s):", name, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Ceilings bound what a topology may ask for.
type Ceilings struct {
	MaxNodes      int
	MaxLoop       int
	MaxRetries    int
	MaxNodeTimout time.Duration
}

// DefaultCeilings are used when CompileOptions leaves them zero.
var defaultCeilings = Ceilings{MaxNodes: 1000, MaxLoop: 100, MaxRetries: 10, MaxNodeTimout: time.Hour}

// CompileOptions configures Compile. Nil means the defaults.
type CompileOptions struct {
	Ceilings Ceilings
	// DefaultTimeout is a node's timeout when it sets none (default 30s).
	DefaultTimeout time.Duration
	// Agents supplies ready agents by node name (the Go builder uses it);
	// such nodes need no agent field.
	Agents map[string]agent.Agent
}

type compiler struct {
	spec     *Spec
	reg      *Registry
	opts     CompileOptions
	problems []Problem
}

func (c *compiler) add(node, field, format string, args ...any) {
	c.problems = append(c.problems, Problem{Node: node, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Compile validates spec and builds its agents with reg. Every problem is
// reported in one *ValidationError, each naming its node.
func Compile(spec *Spec, reg *Registry, opts *CompileOptions) (*Graph, error) {
	c := &compiler{spec: spec, reg: reg}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Ceilings == (Ceilings{}) {
		c.opts.Ceilings = defaultCeilings
	}
	if c.opts.DefaultTimeout <= 0 {
		c.opts.DefaultTimeout = 30 * time.Second
	}
	if reg == nil {
		c.reg = NewRegistry()
	}
	g := c.compile()
	if len(c.problems) > 0 {
		return nil, &ValidationError{Graph: spec.Name, Problems: c.problems}
	}
	for i, n := range g.Nodes {
		if i == 0 || n.Timeout < g.MinTimeout {
			g.MinTimeout = n.Timeout
		}
		if len(n.Downstream) == 0 {
			g.Sinks = append(g.Sinks, i)
		}
	}
	return g, nil
}

func (c *compiler) compile() *Graph {
	s := c.spec
	g := &Graph{Name: s.Name, Description: s.Description, index: map[string]int{}}
	if s.Name == "" {
		c.add("", "name", "the graph needs a name")
	} else if !validName(s.Name) {
		c.add("", "name", "%q: use letters, digits, '-', '_' and '.' only", s.Name)
	}
	if len(s.Nodes) == 0 {
		c.add("", "nodes", "the graph has no nodes")
		return g
	}
	if len(s.Nodes) > c.opts.Ceilings.MaxNodes {
		c.add("", "nodes", "%d nodes exceeds the limit of %d", len(s.Nodes), c.opts.Ceilings.MaxNodes)
	}
	if s.InputSchema != nil {
		raw, err := json.Marshal(s.InputSchema)
		if err != nil {
			c.add("", "input_schema", "%v", err)
		}
		g.InputSchema = raw
	}
	g.Limits = Limits{Deadline: s.Limits.Deadline.D(), MaxSteps: s.Limits.MaxSteps, MaxTokens: s.Limits.MaxTokens}
	if s.Limits.MaxSteps < 0 || s.Limits.MaxTokens < 0 {
		c.add("", "limits", "limits cannot be negative")
	}
	c.scanCredentials("", "description", s.Description)

	// Names first, so edges can be resolved whatever their order.
	for i := range s.Nodes {
		n := &s.Nodes[i]
		switch {
		case n.Name == "":
			c.add(fmt.Sprintf("#%d", i+1), "name", "node has no name")
		case !validName(n.Name):
			c.add(n.Name, "name", "use letters, digits, '-', '_' and '.' only")
		}
		if _, dup := g.index[n.Name]; dup && n.Name != "" {
			c.add(n.Name, "name", "duplicate node name")
			continue
		}
		g.index[n.Name] = i
		g.Nodes = append(g.Nodes, &Node{Name: n.Name, Index: i})
	}
	if len(g.Nodes) != len(s.Nodes) {
		return g // duplicate names: edges would be ambiguous
	}
	for i := range s.Nodes {
		c.node(g, &s.Nodes[i], g.Nodes[i])
	}
	c.tools(g)
	c.edges(g)
	if len(c.problems) == 0 {
		c.order(g)
	}
	return g
}

func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func (c *compiler) node(g *Graph, ns *NodeSpec, n *Node) {
	name := n.Name

	// Agent.
	var a agent.Agent
	if pre, ok := c.opts.Agents[name]; ok {
		a = pre
	} else if ref, err := ParseRef(ns); err != nil {
		c.add(name, "agent", "%v", err)
	} else {
		c.scanConfig(name, "agent", ref.Config)
		c.scanCredentials(name, "agent", ref.Target)
		if ag, err := c.reg.build(ref); err != nil {
			c.add(name, "agent", "%v", err)
		} else {
			a = ag
		}
	}
	n.Agent = a
	if a != nil {
		n.Card = a.Card()
		n.AgentEffects = slices.Clone(n.Card.Effects)
		if len(n.Card.InputSchema) > 0 {
			s, err := CompileSchema(n.Card.InputSchema)
			if err != nil {
				c.add(name, "agent", "input schema: %v", err)
			}
			n.inputSchema = s
		}
	}

	// Declarations: the node's own override the card's where given.
	if ns.Effects != nil {
		var effs []agent.Effect
		for _, e := range ns.Effects {
			eff, err := agent.ParseEffect(e)
			if err != nil {
				c.add(name, "effects", "%v", err)
				continue
			}
			if eff != agent.EffectNone {
				effs = append(effs, eff)
			}
		}
		n.Card.Effects = effs
	}
	if ns.Egress != nil {
		for _, h := range ns.Egress {
			if err := checkHostPattern(h); err != nil {
				c.add(name, "egress", "%v", err)
			}
		}
		n.Card.Egress = slices.Clone(ns.Egress)
	}
	if ns.Secrets != nil {
		for _, s := range ns.Secrets {
			if secrets.CheckName(s) != nil {
				c.add(name, "secrets", "%q is not a secret name (want NAMES_LIKE_THIS); a value never goes in a topology", s)
			}
		}
		n.Card.Secrets = slices.Clone(ns.Secrets)
	}
	for _, ap := range ns.AllowPrivate {
		if _, err := netip.ParseAddrPort(ap); err != nil {
			c.add(name, "allow_private", "%q: want one IP:port such as 127.0.0.1:8080", ap)
		}
	}
	if len(ns.AllowPrivate) > 1 {
		c.add(name, "allow_private", "at most one private target per node")
	}
	n.AllowPrivate = slices.Clone(ns.AllowPrivate)
	n.Sensitive, n.Trusted = ns.Sensitive, ns.Trusted

	switch Approval(ns.Approval) {
	case "":
		n.Approval = ApprovalOnUntrusted
	case ApprovalRequired, ApprovalOnUntrusted, ApprovalNever:
		n.Approval = Approval(ns.Approval)
	default:
		c.add(name, "approval", "unknown value %q (want required, on-untrusted or never)", ns.Approval)
	}

	n.Timeout = ns.Timeout.D()
	if n.Timeout == 0 {
		n.Timeout = c.opts.DefaultTimeout
	}
	if n.Timeout > c.opts.Ceilings.MaxNodeTimout {
		c.add(name, "timeout", "%v exceeds the ceiling of %v", n.Timeout, c.opts.Ceilings.MaxNodeTimout)
	}
	if r := ns.Retry; r != nil {
		if r.Max < 0 || r.Max > c.opts.Ceilings.MaxRetries {
			c.add(name, "retry.max", "%d is outside 0..%d", r.Max, c.opts.Ceilings.MaxRetries)
		}
		n.Retries, n.Backoff = r.Max, r.Backoff.D()
		if n.Backoff == 0 {
			n.Backoff = 100 * time.Millisecond
		}
	}
	if ns.Concurrency < 0 {
		c.add(name, "concurrency", "cannot be negative")
	} else if ns.Concurrency > 0 {
		n.Concurrency = ns.Concurrency
		n.Sem = make(chan struct{}, ns.Concurrency)
	}
	if gs := ns.Gate; gs != nil {
		gt := &Gate{OnFail: GateAction(gs.OnFail), Retries: gs.Retries}
		if gt.OnFail == "" {
			gt.OnFail = GateFail
		}
		switch gt.OnFail {
		case GateFail, GateWarn:
		case GateRetry:
			if gs.Retries < 1 || gs.Retries > c.opts.Ceilings.MaxRetries {
				c.add(name, "gate.retries", "on_fail: retry needs retries in 1..%d", c.opts.Ceilings.MaxRetries)
			}
		default:
			c.add(name, "gate.on_fail", "unknown value %q (want fail, warn or retry)", gs.OnFail)
		}
		if ch, err := compileCondition(gs.Check); err != nil {
			c.add(name, "gate.check", "%v", err)
		} else {
			gt.Check = ch
		}
		n.Gate = gt
	}
}

// tools compiles the graph's tool agents and binds each node's tools: list.
func (c *compiler) tools(g *Graph) {
	byName := map[string]*Node{}
	for i := range c.spec.Tools {
		ts := &c.spec.Tools[i]
		name := ts.Name
		switch {
		case name == "" || !validName(name):
			c.add(fmt.Sprintf("tools#%d", i+1), "name", "a tool needs a name of letters, digits, '-', '_' or '.'")
			continue
		case byName[name] != nil:
			c.add(name, "name", "duplicate tool name")
			continue
		}
		if _, clash := g.index[name]; clash {
			c.add(name, "name", "a tool and a node share this name")
			continue
		}
		if ts.After != nil || ts.Branch != nil || ts.Loop != nil || ts.Barrier != "" || len(ts.ToolNames) > 0 {
			c.add(name, "tools", "a tool is called, not scheduled: after, barrier, branch, loop and tools do not apply")
		}
		t := &Node{Name: name, Index: -1}
		c.node(g, ts, t)
		byName[name] = t
		g.Tools = append(g.Tools, t)
	}
	for i := range c.spec.Nodes {
		ns, n := &c.spec.Nodes[i], g.Nodes[i]
		for _, tn := range ns.ToolNames {
			t, ok := byName[tn]
			if !ok {
				c.add(n.Name, "tools", "unknown tool %q (declare it under the graph's tools:)", tn)
				continue
			}
			n.Tools = append(n.Tools, t)
		}
	}
}

func checkHostPattern(h string) error {
	host := strings.TrimPrefix(h, "*.")
	if host == "" || strings.ContainsAny(host, "/:@ *") {
		return fmt.Errorf("%q: want a host name such as api.example.com or *.example.com", h)
	}
	return nil
}

func (c *compiler) edges(g *Graph) {
	s := c.spec
	for i := range s.Nodes {
		ns, n := &s.Nodes[i], g.Nodes[i]
		var ups []string
		switch {
		case ns.After != nil:
			ups = *ns.After
		case i > 0:
			ups = []string{s.Nodes[i-1].Name}
		}
		seen := map[string]bool{}
		for _, u := range ups {
			j, ok := g.index[u]
			switch {
			case !ok:
				c.add(n.Name, "after", "unknown node %q", u)
				continue
			case j == i:
				c.add(n.Name, "after", "a node cannot follow itself (use loop: for a bounded back-edge)")
				continue
			case seen[u]:
				c.add(n.Name, "after", "%q listed twice", u)
				continue
			}
			seen[u] = true
			n.Upstream = append(n.Upstream, j)
			n.UpstreamName = append(n.UpstreamName, u)
			g.Nodes[j].Downstream = append(g.Nodes[j].Downstream, i)
		}
		if len(n.Upstream) == 0 && len(ups) == 0 {
			g.Roots = append(g.Roots, i)
		}
		n.PlainJoinKeys = true
		for _, u := range n.UpstreamName {
			if secrets.SensitiveKey(u) {
				n.PlainJoinKeys = false
			}
		}
		switch b := Barrier(ns.Barrier); b {
		case "", BarrierAll:
			n.Barrier = BarrierAll
		case BarrierAny, BarrierOptional:
			n.Barrier = b
		case BarrierKOfN:
			n.Barrier, n.K = b, ns.K
			if ns.K < 1 {
				c.add(n.Name, "k", "barrier k_of_n needs k >= 1")
			} else if ns.K > len(ups) {
				c.add(n.Name, "k", "impossible barrier: k=%d but only %d upstream node(s)", ns.K, len(ups))
			}
		default:
			c.add(n.Name, "barrier", "unknown barrier %q (want all, any, k_of_n or optional)", ns.Barrier)
		}
		if ns.Barrier != "" && ns.Barrier != string(BarrierKOfN) && ns.K != 0 {
			c.add(n.Name, "k", "k is only meaningful with barrier: k_of_n")
		}
		if ns.Barrier != "" && len(ups) == 0 {
			c.add(n.Name, "barrier", "a root node has no upstream to wait for")
		}
	}
	if len(g.Roots) == 0 && len(c.problems) == 0 {
		c.add("", "nodes", "no root node: every node waits for another (unbounded cycle)")
	}
	c.cycles(g)
	for i := range s.Nodes {
		c.branch(g, i)
	}
	for i := range s.Nodes {
		c.loop(g, i)
	}
	c.reachable(g)
}

// cycles reports every node on a cycle of after-edges: such a cycle has no
// bound, so it is an error (a bounded back-edge is written with loop:).
func (c *compiler) cycles(g *Graph) {
	const white, grey, black = 0, 1, 2
	color := make([]int, len(g.Nodes))
	reported := map[int]bool{}
	var stack []int
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, d := range g.Nodes[i].Downstream {
			switch color[d] {
			case white:
				visit(d)
			case grey:
				start := slices.Index(stack, d)
				names := []string{}
				for _, k := range stack[start:] {
					names = append(names, g.Nodes[k].Name)
				}
				if !reported[d] {
					reported[d] = true
					c.add(g.Nodes[d].Name, "after", "unbounded cycle %s -> %s (a back-edge needs loop: {to, max})", strings.Join(names, " -> "), g.Nodes[d].Name)
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range g.Nodes {
		if color[i] == white {
			visit(i)
		}
	}
}

func (c *compiler) branch(g *Graph, i int) {
	bs := c.spec.Nodes[i].Branch
	if bs == nil {
		return
	}
	n := g.Nodes[i]
	br := &Branch{Path: bs.On, Cases: map[string][]int{}}
	if bs.On != "" {
		ch, err := compileCondition(Condition{Path: bs.On, Exists: new(bool)})
		if err != nil {
			c.add(n.Name, "branch.on", "%v", err)
		}
		br.check = ch
	}
	if len(bs.Cases) == 0 {
		c.add(n.Name, "branch.cases", "a branch needs at least one case")
	}
	resolve := func(field string, targets []string) []int {
		var out []int
		for _, t := range targets {
			j, ok := g.index[t]
			if !ok {
				c.add(n.Name, field, "unknown node %q", t)
				continue
			}
			if !slices.Contains(n.Downstream, j) {
				c.add(n.Name, field, "%q does not follow this node (add it to %q's after)", t, t)
				continue
			}
			out = append(out, j)
		}
		return out
	}
	keys := make([]string, 0, len(bs.Cases))
	for k := range bs.Cases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	routed := map[int]bool{}
	for _, k := range keys {
		br.Cases[k] = resolve("branch.cases."+k, bs.Cases[k])
		for _, j := range br.Cases[k] {
			routed[j] = true
		}
	}
	br.Default = resolve("branch.default", bs.Default)
	for _, j := range br.Default {
		routed[j] = true
	}
	for _, d := range n.Downstream {
		if !routed[d] {
			c.add(g.Nodes[d].Name, "after", "unreachable: follows branch %q but no case or default routes to it", n.Name)
		}
	}
	n.Branch = br
}

func (c *compiler) loop(g *Graph, i int) {
	ls := c.spec.Nodes[i].Loop
	if ls == nil {
		return
	}
	n := g.Nodes[i]
	lp := &Loop{Max: ls.Max}
	if ls.Max < 1 {
		c.add(n.Name, "loop.max", "unbounded cycle: a loop needs max >= 1")
	} else if ls.Max > c.opts.Ceilings.MaxLoop {
		c.add(n.Name, "loop.max", "%d exceeds the ceiling of %d iterations", ls.Max, c.opts.Ceilings.MaxLoop)
	}
	j, ok := g.index[ls.To]
	if !ok {
		c.add(n.Name, "loop.to", "unknown node %q", ls.To)
		return
	}
	lp.To = j
	if ls.Until != nil {
		ch, err := compileCondition(*ls.Until)
		if err != nil {
			c.add(n.Name, "loop.until", "%v", err)
		}
		lp.Until = ch
	}
	// The body: nodes on a path from To to this node.
	fromTo := descendants(g, j)
	toMe := ancestors(g, i)
	if j != i && !fromTo[i] {
		c.add(n.Name, "loop.to", "%q must come before this node (the loop goes back to it)", ls.To)
		return
	}
	var body []int
	for k := range g.Nodes {
		if k == i || k == j || (fromTo[k] && toMe[k]) {
			body = append(body, k)
		}
	}
	for _, k := range body {
		if k == i {
			continue
		}
		for _, d := range g.Nodes[k].Downstream {
			if !slices.Contains(body, d) {
				c.add(g.Nodes[d].Name, "after", "follows %q inside the loop of %q; only the loop's last node may feed nodes outside it", g.Nodes[k].Name, n.Name)
			}
		}
		if g.Nodes[k].Loop != nil || (c.spec.Nodes[k].Loop != nil) {
			c.add(n.Name, "loop", "nested loops are not supported (%q also loops)", g.Nodes[k].Name)
		}
	}
	n.Loop, n.LoopBody = lp, body
}

func descendants(g *Graph, from int) map[int]bool {
	seen := map[int]bool{}
	var walk func(int)
	walk = func(i int) {
		for _, d := range g.Nodes[i].Downstream {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(from)
	return seen
}

func ancestors(g *Graph, of int) map[int]bool {
	seen := map[int]bool{}
	var walk func(int)
	walk = func(i int) {
		for _, u := range g.Nodes[i].Upstream {
			if !seen[u] {
				seen[u] = true
				walk(u)
			}
		}
	}
	walk(of)
	return seen
}

// reachable reports nodes no root can reach (they sit behind a cycle).
func (c *compiler) reachable(g *Graph) {
	seen := map[int]bool{}
	for _, r := range g.Roots {
		seen[r] = true
		for d := range descendants(g, r) {
			seen[d] = true
		}
	}
	for i, n := range g.Nodes {
		if !seen[i] && len(n.Upstream) > 0 {
			onCycle := slices.ContainsFunc(c.problems, func(p Problem) bool { return p.Node == n.Name && p.Field == "after" })
			if !onCycle {
				c.add(n.Name, "after", "unreachable: no root leads here")
			}
		}
	}
}

// order sorts g.Nodes topologically (Kahn), keeping file order among peers,
// and renumbers every index.
func (c *compiler) order(g *Graph) {
	indeg := make([]int, len(g.Nodes))
	for _, n := range g.Nodes {
		indeg[n.Index] = len(n.Upstream)
	}
	var queue, out []int
	for i := range g.Nodes {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		out = append(out, i)
		for _, d := range g.Nodes[i].Downstream {
			if indeg[d]--; indeg[d] == 0 {
				queue = append(queue, d)
			}
		}
	}
	if len(out) != len(g.Nodes) {
		return // cycles were already reported
	}
	pos := make([]int, len(out))
	for newIdx, old := range out {
		pos[old] = newIdx
	}
	remap := func(xs []int) {
		for k, x := range xs {
			xs[k] = pos[x]
		}
	}
	nodes := make([]*Node, len(out))
	for _, n := range g.Nodes {
		remap(n.Upstream)
		remap(n.Downstream)
		remap(n.LoopBody)
		sort.Ints(n.LoopBody)
		if n.Loop != nil {
			n.Loop.To = pos[n.Loop.To]
		}
		if n.Branch != nil {
			for _, v := range n.Branch.Cases {
				remap(v)
			}
			remap(n.Branch.Default)
		}
		n.Index = pos[n.Index]
		nodes[n.Index] = n
	}
	g.Nodes = nodes
	remap(g.Roots)
	sort.Ints(g.Roots)
	for _, n := range nodes {
		g.index[n.Name] = n.Index
	}
}
