package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/telemetry"
)

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

func TestMetricsMoveAfterRuns(t *testing.T) {
	m := telemetry.NewMetrics()
	tr, err := telemetry.New(&telemetry.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Tracer: tr})})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	before := scrape(t, srv.URL+"/metrics")
	if !strings.Contains(before, "babel_runs_started_total 0") {
		t.Fatalf("before any run:\n%s", before)
	}

	ok := build(t, graph.New("ok").Add("trim", builtin.Trim()).Add("upper", builtin.Upper()))
	if res := r.Run(context.Background(), &run.Request{Graph: ok, Input: agent.Text(" x ")}); res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	bad := build(t, graph.New("bad").Add("boom", builtin.Fail(canary, false)))
	if res := r.Run(context.Background(), &run.Request{Graph: bad, Input: agent.Text(canary)}); res.Status != run.StatusFailed {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}

	after := scrape(t, srv.URL+"/metrics")
	for _, want := range []string{
		"babel_runs_started_total 2",
		`babel_runs_finished_total{status="succeeded"} 1`,
		`babel_runs_finished_total{status="failed"} 1`,
		"babel_runs_active 0",
		`babel_run_duration_seconds_count{status="succeeded"} 1`,
		`babel_node_calls_total{adapter="builtin",outcome="ok"} 2`,
		`babel_node_calls_total{adapter="builtin",outcome="peer"} 1`,
		`babel_node_call_duration_seconds_count{adapter="builtin"} 3`,
		"go_goroutines",
	} {
		if !strings.Contains(after, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
	if strings.Contains(after, canary) {
		t.Fatal("the metrics hold content")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsHandlerRefusesWrites(t *testing.T) {
	srv := httptest.NewServer(telemetry.NewMetrics().Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

func TestMetricsUseTheirOwnRegistries(t *testing.T) {
	// Two sets side by side would panic on duplicate registration if they
	// shared the default registry.
	a, b := telemetry.NewMetrics(), telemetry.NewMetrics()
	if a.Registry() == b.Registry() {
		t.Fatal("two Metrics share a registry")
	}
}
