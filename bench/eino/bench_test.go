package eino_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cloudwego/eino/compose"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// The shapes, identical for both frameworks (and to run/bench_test.go):
//
//   - Chain3: a -> b -> c.
//   - FanOut100: src -> w00..w97 -> join, the join waiting for all 98.
//   - DAG1000: 10 layers of 100; node i of layer l>0 waits for nodes i, i+1
//     and, for even i, i+37 (mod 100) of layer l-1. Layer 0 are roots, layer
//     9 are sinks.
//
// Every node returns its input untouched. Where a node has several
// predecessors it receives their outputs keyed by predecessor name: Babelagent
// does that itself (a JSON object keyed by upstream name); eino does it with
// compose.WithOutputKey on each predecessor, which wraps the output in
// map[string]any{name: out}, and its default map merge of fan-in values.
// Both run in barrier-all mode: eino's AllPredecessor trigger mode.
const (
	fanWorkers = 98
	dagLayers  = 10
	dagWidth   = 100
)

func dagDeps(i int) []int {
	d := []int{i, (i + 1) % dagWidth}
	if i%2 == 0 {
		d = append(d, (i+37)%dagWidth)
	}
	return d
}

func worker(i int) string     { return fmt.Sprintf("w%02d", i) }
func dagNode(l, i int) string { return fmt.Sprintf("l%d_n%02d", l, i) }

// --- Babelagent ---

type noop struct{}

func (noop) Card() agent.Card { return agent.Card{Name: "bench:noop", Kind: "fn"} }
func (noop) Run(_ context.Context, in agent.Message) (agent.Message, error) {
	return in, nil
}

var _ agent.Agent = noop{}

func babelChain3() *graph.Builder {
	return graph.New("chain3").Add("a", noop{}).Add("b", noop{}).Add("c", noop{})
}

func babelFanOut100() *graph.Builder {
	b := graph.New("fanout100").Add("src", noop{})
	ws := make([]string, fanWorkers)
	for i := range ws {
		ws[i] = worker(i)
		b.Add(ws[i], noop{}, graph.After("src"))
	}
	return b.Add("join", noop{}, graph.After(ws...), graph.Join(graph.BarrierAll, 0))
}

func babelDAG1000() *graph.Builder {
	b := graph.New("dag1000")
	for l := range dagLayers {
		for i := range dagWidth {
			if l == 0 {
				b.Add(dagNode(l, i), noop{}, graph.After())
				continue
			}
			var ups []string
			for _, u := range dagDeps(i) {
				ups = append(ups, dagNode(l-1, u))
			}
			b.Add(dagNode(l, i), noop{}, graph.After(ups...), graph.Join(graph.BarrierAll, 0))
		}
	}
	return b
}

func benchBabel(b *testing.B, gb *graph.Builder) {
	g, err := gb.Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := run.NewRunner(&run.Config{Limits: run.Limits{MaxSteps: 10_000}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, in := context.Background(), agent.Text("x")
	if res := r.Run(ctx, &run.Request{Graph: g, Input: in}); res.Status != run.StatusSucceeded {
		b.Fatalf("%s: %s", res.Status, res.Error)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if res := r.Run(ctx, &run.Request{Graph: g, Input: in}); res.Status != run.StatusSucceeded {
			b.Fatalf("%s: %s", res.Status, res.Error)
		}
	}
	reportCPU(b, cpu)
}

// reportCPU adds cpu-ns/op: process CPU time (all threads, GC included) per
// op since start.
func reportCPU(b *testing.B, start time.Duration) {
	if start > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkBabel(b *testing.B) {
	b.Run("Chain3", func(b *testing.B) { benchBabel(b, babelChain3()) })
	b.Run("FanOut100", func(b *testing.B) { benchBabel(b, babelFanOut100()) })
	b.Run("DAG1000", func(b *testing.B) { benchBabel(b, babelDAG1000()) })
}

// --- eino ---

func noopLambda[T any]() *compose.Lambda {
	return compose.InvokableLambda(func(_ context.Context, in T) (T, error) { return in, nil })
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func einoChain3(tb testing.TB) compose.Runnable[string, string] {
	g := compose.NewGraph[string, string]()
	prev := compose.START
	for _, n := range []string{"a", "b", "c"} {
		must(tb, g.AddLambdaNode(n, noopLambda[string]()))
		must(tb, g.AddEdge(prev, n))
		prev = n
	}
	must(tb, g.AddEdge(prev, compose.END))
	r, err := g.Compile(context.Background(), compose.WithNodeTriggerMode(compose.AllPredecessor))
	must(tb, err)
	return r
}

func einoFanOut100(tb testing.TB) compose.Runnable[string, map[string]any] {
	g := compose.NewGraph[string, map[string]any]()
	must(tb, g.AddLambdaNode("src", noopLambda[string]()))
	must(tb, g.AddEdge(compose.START, "src"))
	must(tb, g.AddLambdaNode("join", noopLambda[map[string]any]()))
	for i := range fanWorkers {
		w := worker(i)
		must(tb, g.AddLambdaNode(w, noopLambda[string](), compose.WithOutputKey(w)))
		must(tb, g.AddEdge("src", w))
		must(tb, g.AddEdge(w, "join"))
	}
	must(tb, g.AddEdge("join", compose.END))
	r, err := g.Compile(context.Background(), compose.WithNodeTriggerMode(compose.AllPredecessor))
	must(tb, err)
	return r
}

func einoDAG1000(tb testing.TB) compose.Runnable[string, map[string]any] {
	g := compose.NewGraph[string, map[string]any]()
	for l := range dagLayers {
		for i := range dagWidth {
			n := dagNode(l, i)
			if l == 0 {
				must(tb, g.AddLambdaNode(n, noopLambda[string](), compose.WithOutputKey(n)))
				must(tb, g.AddEdge(compose.START, n))
				continue
			}
			must(tb, g.AddLambdaNode(n, noopLambda[map[string]any](), compose.WithOutputKey(n)))
			for _, u := range dagDeps(i) {
				must(tb, g.AddEdge(dagNode(l-1, u), n))
			}
			if l == dagLayers-1 {
				must(tb, g.AddEdge(n, compose.END))
			}
		}
	}
	r, err := g.Compile(context.Background(), compose.WithNodeTriggerMode(compose.AllPredecessor))
	must(tb, err)
	return r
}

func benchEino[O any](b *testing.B, r compose.Runnable[string, O]) {
	ctx := context.Background()
	if _, err := r.Invoke(ctx, "x"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := r.Invoke(ctx, "x"); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

func BenchmarkEino(b *testing.B) {
	b.Run("Chain3", func(b *testing.B) { benchEino(b, einoChain3(b)) })
	b.Run("FanOut100", func(b *testing.B) { benchEino(b, einoFanOut100(b)) })
	b.Run("DAG1000", func(b *testing.B) { benchEino(b, einoDAG1000(b)) })
}
