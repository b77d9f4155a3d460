package serve

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/serve/service"
)

// metrics is one server's Prometheus registry: never the global one.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	refused  *prometheus.CounterVec
	started  *prometheus.CounterVec
	finished *prometheus.CounterVec
	runTime  *prometheus.HistogramVec
	rejected *prometheus.CounterVec
	graphs   map[string]*graphMetrics
}

// graphMetrics are one graph's series, resolved once: a run touches them
// without a label lookup.
type graphMetrics struct {
	started   prometheus.Counter
	runTime   prometheus.Observer
	succeeded prometheus.Counter
}

func newMetrics(graphs []string, active func() int) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), graphs: map[string]*graphMetrics{}}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "babel_http_requests_total",
		Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "babel_http_request_duration_seconds",
		Help: "HTTP request latency by route.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
		[]string{"route"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "babel_http_refused_total",
		Help: "Requests refused before routing, by reason (host, origin, auth, body)."}, []string{"reason"})
	m.started = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "babel_runs_started_total",
		Help: "Runs started by graph."}, []string{"graph"})
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "babel_runs_finished_total",
		Help: "Runs finished by graph and status."}, []string{"graph", "status"})
	m.runTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "babel_run_duration_seconds",
		Help: "Run duration by graph.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"graph"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "babel_runs_rejected_total",
		Help: "Runs refused before starting, by graph and code (busy, rate_limited, invalid_input, ...)."}, []string{"graph", "code"})
	activeRuns := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "babel_runs_active", Help: "Runs in flight."},
		func() float64 { return float64(active()) })
	m.reg.MustRegister(m.requests, m.latency, m.refused, m.started, m.finished, m.runTime, m.rejected, activeRuns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, g := range graphs {
		m.graphs[g] = &graphMetrics{started: m.started.WithLabelValues(g), runTime: m.runTime.WithLabelValues(g),
			succeeded: m.finished.WithLabelValues(g, string(run.StatusSucceeded))}
	}
	return m
}

// graph keeps label values bounded: a name the server does not serve is
// "unknown", whatever a caller sent.
func (m *metrics) graph(g string) string {
	if m.graphs[g] != nil {
		return g
	}
	return "unknown"
}

func (m *metrics) RunStarted(g string) {
	if gm := m.graphs[g]; gm != nil {
		gm.started.Inc()
		return
	}
	m.started.WithLabelValues("unknown").Inc()
}

func (m *metrics) RunFinished(g string, s run.Status, d time.Duration) {
	gm := m.graphs[g]
	if gm == nil {
		m.finished.WithLabelValues("unknown", string(s)).Inc()
		return
	}
	gm.runTime.Observe(d.Seconds())
	if s == run.StatusSucceeded {
		gm.succeeded.Inc()
		return
	}
	m.finished.WithLabelValues(g, string(s)).Inc()
}
func (m *metrics) RunRejected(g string, c service.Code) {
	m.rejected.WithLabelValues(m.graph(g), string(c)).Inc()
}

var _ service.Observer = (*metrics)(nil)

// instrument counts and times the requests of one route.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	obs := m.latency.WithLabelValues(route)
	ok := m.requests.WithLabelValues(route, "200")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		obs.Observe(time.Since(start).Seconds())
		if sw.code == http.StatusOK {
			ok.Inc()
		} else {
			m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		}
	})
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4})
}

// statusWriter records the status code; it passes Flush and Unwrap through
// so streams keep working.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	s.wrote = true
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
