package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the Prometheus metrics of runs and calls, in a registry of
// their own (never the default one). Labels are low-cardinality and
// content-free: a run's status, a call's adapter kind and error class. No
// run id, graph, node or principal becomes a label.
//
//	babel_runs_started_total
//	babel_runs_finished_total{status}
//	babel_runs_active
//	babel_run_duration_seconds{status}
//	babel_node_calls_total{adapter,outcome}      outcome: ok, denied, timeout, peer...
//	babel_node_call_duration_seconds{adapter}
//
// It is fed by a Tracer (Options.Metrics) and safe for concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	runsStarted  prometheus.Counter
	runsFinished *prometheus.CounterVec
	runsActive   prometheus.Gauge
	runDuration  *prometheus.HistogramVec
	calls        *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
}

// durationBuckets span a builtin's milliseconds to a model call's minutes.
func durationBuckets() []float64 {
	return []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
}

// NewMetrics returns metrics registered in a fresh registry, along with the
// Go runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "babel_runs_started_total", Help: "Runs started.",
		}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "babel_runs_finished_total", Help: "Runs finished or paused, by final status.",
		}, []string{"status"}),
		runsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "babel_runs_active", Help: "Runs in flight.",
		}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "babel_run_duration_seconds", Help: "Run wall time, by final status.", Buckets: durationBuckets(),
		}, []string{"status"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "babel_node_calls_total", Help: "Node and tool calls through the kernel, by adapter and outcome.",
		}, []string{"adapter", "outcome"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "babel_node_call_duration_seconds", Help: "Node and tool call duration, by adapter.", Buckets: durationBuckets(),
		}, []string{"adapter"}),
	}
	m.reg.MustRegister(m.runsStarted, m.runsFinished, m.runsActive, m.runDuration, m.calls, m.callDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the metrics' registry, for a caller's own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format, for
// GET /metrics. Other methods get 405. Scrapes are bounded in number and
// time so a slow scraper cannot pile up work.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:            m.reg,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// The hooks below are nil-safe: a Tracer without metrics calls them on nil.

func (m *Metrics) runStarted() {
	if m == nil {
		return
	}
	m.runsStarted.Inc()
	m.runsActive.Inc()
}

func (m *Metrics) runFinished(status string, d time.Duration) {
	if m == nil {
		return
	}
	if status == "" {
		status = "unknown"
	}
	m.runsActive.Dec()
	m.runsFinished.WithLabelValues(status).Inc()
	m.runDuration.WithLabelValues(status).Observe(d.Seconds())
}

func (m *Metrics) callFinished(adapter, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(adapter, outcome).Inc()
	m.callDuration.WithLabelValues(adapter).Observe(d.Seconds())
}
