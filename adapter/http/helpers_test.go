package http_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
	"github.com/babelagent/babel/internal/topotest"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

// vault is a kernel secret source holding fixed values; it hands a call
// only the names its node declares, as the real broker does.
type vault map[string]string

func (v vault) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	var ss []secrets.Secret
	for _, n := range names {
		if val, ok := v[n]; ok {
			ss = append(ss, secrets.New(n, val))
		}
	}
	return agent.NewSecrets(ss...), nil
}

// compile builds a topology with a registry holding the http kinds and the builtins.
func compile(t testing.TB, topology string, opts *httpadapter.Options) (*graph.Graph, error) {
	t.Helper()
	r := graph.NewRegistry()
	builtin.Register(r)
	httpadapter.Register(r, opts)
	return topotest.Compile(t, r, topology, nil)
}

func mustCompile(t testing.TB, topology string, opts *httpadapter.Options) *graph.Graph {
	t.Helper()
	g, err := compile(t, topology, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return g
}

func runGraph(t testing.TB, g *graph.Graph, v vault, in agent.Message) *run.Result {
	t.Helper()
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Secrets: v})})
	if err != nil {
		t.Fatal(err)
	}
	return r.Run(context.Background(), &run.Request{Graph: g, Input: in})
}

// runGraphEvents runs g and returns the result and every event, as JSON lines.
func runGraphEvents(t testing.TB, g *graph.Graph, v vault, in agent.Message) (*run.Result, string) {
	t.Helper()
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Secrets: v})})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: in, OnEvent: func(e run.Event) {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}})
	return res, b.String()
}

func resultJSON(t testing.TB, res *run.Result) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hit is one request a recording server received.
type hit struct {
	Method, Path, Query, ContentType, Auth string
	Header                                 http.Header
	Body                                   string
}

// recorder is a real HTTP server on loopback that records what reaches it.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newRecorder(t testing.TB, h http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 0, 512)
		buf := make([]byte, 512)
		for {
			n, err := r.Body.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		rec.mu.Lock()
		rec.hits = append(rec.hits, hit{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"),
			Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), Body: string(b),
		})
		rec.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) Hits() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

func (r *recorder) private() string { return egressPrivate(r.URL) }

func egressPrivate(u string) string { return egress.AllowPrivateURL(u) }

func nodeTrace(res *run.Result, name string) run.NodeTrace {
	for _, n := range res.Trace {
		if n.Node == name {
			return n
		}
	}
	return run.NodeTrace{}
}
