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
// the real audit log: an intent record durable before each call and an
// outcome after, group-committed across concurrent callers.
func BenchmarkAuditedNodeCall(b *testing.B) {
	dir := b.TempDir()
	w, err := audit.Open(context.Background(), dir+"/log/audit.db", &audit.Options{KeyPath: dir + "/key/audit.key"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	k := kernel.New(&kernel.Options{Audit: w})
	g, err := graph.New("bench").Add("echo", builtin.Echo()).Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	n := g.Nodes[0]
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := &kernel.Run{ID: "bench", RootID: "bench", Graph: "bench", Principal: "local:bench", Budget: kernel.NewBudget(0, 0)}
		in := agent.Text("hello")
		for pb.Next() {
			if _, err := k.Invoke(context.Background(), &kernel.Call{Run: r, Node: n, Input: in, Attempt: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
