package telemetry_test

import (
	"context"
	"log"
	"net/http"

	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/telemetry"
)

// One Tracer feeds both the spans and the metrics; the kernel needs only it.
func Example() {
	m := telemetry.NewMetrics()
	t, err := telemetry.New(&telemetry.Options{OTLPEndpoint: "http://localhost:4318", Metrics: m})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Shutdown(context.Background())

	k := kernel.New(&kernel.Options{Tracer: t})
	_ = k // run.NewRunner(&run.Config{Kernel: k})

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
}
