package engine_test

import (
	"context"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// BenchmarkEngineRun is a 3-node builtin graph through the full engine:
// policy, stored run, audit log, telemetry.
func BenchmarkEngineRun(b *testing.B) {
	env := []string{"HOME=" + b.TempDir(), "USER=bench"}
	e, err := engine.Open(context.Background(), engine.Defaults(env), &engine.Options{Environ: env})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	g, _ := graph.New("pipeline").Add("trim", builtin.Trim()).Add("upper", builtin.Upper()).Add("echo", builtin.Echo()).Build(nil)
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := e.Run(context.Background(), &engine.Start{Graph: g, Input: agent.Text(" x "), Principal: "local:bench"}); res.Status != run.StatusSucceeded {
				b.Fatal(res.Status, res.Error)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
