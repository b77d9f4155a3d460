package run_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// The benchmarks measure the scheduler and the kernel alone: every node runs
// noop, which does no work, so ns/op is the cost of moving a run through
// the graph. The same shapes are built with eino in bench/eino; keep the two
// in step.

// noop returns its input as is.
type noop struct{}

func (noop) Card() agent.Card { return agent.Card{Name: "bench:noop", Kind: "fn"} }
func (noop) Run(_ context.Context, in agent.Message) (agent.Message, error) {
	return in, nil
}

var _ agent.Agent = noop{}

// Shape sizes, shared in spirit with bench/eino.
const (
	fanWorkers = 98 // plus a source and a join: 100 nodes
	dagLayers  = 10
	dagWidth   = 100 // dagLayers*dagWidth = 1,000 nodes, the compiler's ceiling
)

// dagDeps lists the nodes of the previous layer that node i of a layer
// waits for: i, i+1 and, for even i, i+37 (mod the width). Every node of
// layers 1.. has two or three upstreams; the graph is the same on every run.
func dagDeps(i int) []int {
	d := []int{i, (i + 1) % dagWidth}
	if i%2 == 0 {
		d = append(d, (i+37)%dagWidth)
	}
	return d
}

func chain3(tb testing.TB) *graph.Graph {
	return build(tb, graph.New("chain3").Add("a", noop{}).Add("b", noop{}).Add("c", noop{}))
}

func fanOut100(tb testing.TB) *graph.Graph {
	b := graph.New("fanout100").Add("src", noop{})
	ws := make([]string, fanWorkers)
	for i := range ws {
		ws[i] = fmt.Sprintf("w%02d", i)
		b.Add(ws[i], noop{}, graph.After("src"))
	}
	b.Add("join", noop{}, graph.After(ws...), graph.Join(graph.BarrierAll, 0))
	return build(tb, b)
}

func dag1000(tb testing.TB) *graph.Graph {
	b := graph.New("dag1000")
	name := func(l, i int) string { return fmt.Sprintf("l%d_n%02d", l, i) }
	for l := range dagLayers {
		for i := range dagWidth {
			if l == 0 {
				b.Add(name(l, i), noop{}, graph.After())
				continue
			}
			var ups []string
			for _, u := range dagDeps(i) {
				ups = append(ups, name(l-1, u))
			}
			b.Add(name(l, i), noop{}, graph.After(ups...), graph.Join(graph.BarrierAll, 0))
		}
	}
	return build(tb, b)
}

func benchGraph(b *testing.B, g *graph.Graph, in agent.Message) {
	// MaxSteps above the default of 1,000 so that DAG1000 is not one step
	// from its budget; Concurrency stays at its default.
	r := newRunner(b, &run.Config{Limits: run.Limits{MaxSteps: 10_000}})
	ctx := context.Background()
	// One run outside the timer checks the shape and warms the pools.
	if res := r.Run(ctx, &run.Request{Graph: g, Input: in}); res.Status != run.StatusSucceeded {
		b.Fatalf("%s: %s: %s", g.Name, res.Status, res.Error)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Run(ctx, &run.Request{Graph: g, Input: in}); res.Status != run.StatusSucceeded {
			b.Fatalf("%s: %s: %s", g.Name, res.Status, res.Error)
		}
	}
}

// BenchmarkChain3: three no-op nodes in a row.
func BenchmarkChain3(b *testing.B) { benchGraph(b, chain3(b), agent.Text("x")) }

// BenchmarkFanOut100: one source, 98 workers, one join waiting for all.
func BenchmarkFanOut100(b *testing.B) { benchGraph(b, fanOut100(b), agent.Text("x")) }

// BenchmarkDAG1000: 10 layers of 100 nodes, each waiting for 2 or 3 of the
// previous layer. A join's input is an object of its upstreams' outputs,
// so with pass-through nodes the payload grows layer by layer; this one
// measures payload copying as much as scheduling.
func BenchmarkDAG1000(b *testing.B) { benchGraph(b, dag1000(b), agent.Text("x")) }
