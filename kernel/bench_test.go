package kernel_test

import (
	"context"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/audit"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
)

// BenchmarkAuditedNodeCall measures node calls through kernel.Invoke with
// the real audit log, group-committed across concurrent callers: for a
// consequential call (write) the intent is durable before the call runs;
// for a pure one both records are queued in order.
func BenchmarkAuditedNodeCall(b *testing.B) {
	b.Run("consequential", func(b *testing.B) {
		benchAudited(b, graph.Declare([]agent.Effect{agent.EffectWrite}, nil, nil), graph.Approve(graph.ApprovalNever))
	})
	b.Run("pure", func(b *testing.B) { benchAudited(b) })
}

func benchAudited(b *testing.B, opts ...graph.NodeOption) {
	dir := b.TempDir()
	w, err := audit.Open(context.Background(), dir+"/log/audit.db", &audit.Options{KeyPath: dir + "/key/audit.key"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	k := kernel.New(&kernel.Options{Audit: w})
	g, err := graph.New("bench").Add("echo", builtin.Echo(), opts...).Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	n := g.Nodes[0]
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		in := agent.Text("hello")
		for pb.Next() {
			// A run per call: the breaker and rate limits are per run.
			r := &kernel.Run{ID: "bench", RootID: "bench", Graph: "bench", Principal: "local:bench", Budget: kernel.NewBudget(0, 0)}
			if _, err := k.Invoke(context.Background(), &kernel.Call{Run: r, Node: n, Input: in, Attempt: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
