// Package llmtest holds what the provider tests share: a loopback server
// replaying recorded provider responses in their exact wire format, a
// secret source, a registry and a Go tool. (The counting listener and the
// SSRF vectors are in internal/loopback.)
//
// It is for tests only; nothing in it may be used by a shipped agent.
package llmtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/babelagent/babel/adapter/llm"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
)

// Registry is the builtins and the llm kinds of providers.
func Registry(opts *llm.Options, providers ...llm.Provider) *graph.Registry {
	if opts == nil {
		opts = &llm.Options{}
	}
	opts.Providers = providers
	r := graph.NewRegistry()
	builtin.Register(r)
	llm.Register(r, opts)
	return r
}

// WeatherIn is Weather's input.
type WeatherIn struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

// Weather is a Go tool with the given description that counts its calls.
func Weather(calls *atomic.Int64, description string) agent.Agent {
	return agent.MustFunc("weather", func(_ context.Context, in WeatherIn) (string, error) {
		calls.Add(1)
		return in.City + ": 18°C and sunny", nil
	}, &agent.FuncOptions{Description: description})
}

// Vault is a kernel secret source holding fixed values; it hands a call
// only the names its node declares.
type Vault map[string]string

// Scope implements kernel.Scoper.
func (v Vault) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	var ss []secrets.Secret
	for _, n := range names {
		if val, ok := v[n]; ok {
			ss = append(ss, secrets.New(n, val))
		}
	}
	return agent.NewSecrets(ss...), nil
}

// Reply is one recorded response: a file under testdata (.sse is sent as
// text/event-stream, event by event; anything else as application/json)
// and its status (200 when zero).
type Reply struct {
	File   string
	Status int
}

// Request is what the replay server received.
type Request struct {
	Path   string
	Header http.Header
	Raw    string
	Body   map[string]any
}

// Replay is a model provider on loopback that answers each request with the
// next recorded reply; once they are used up it repeats the last one.
type Replay struct {
	*httptest.Server
	path    string
	replies []Reply
	mu      sync.Mutex
	reqs    []Request
}

// NewReplay starts a replay server answering POSTs to path.
func NewReplay(t testing.TB, path string, replies ...Reply) *Replay {
	t.Helper()
	if len(replies) == 0 {
		t.Fatal("no replies")
	}
	r := &Replay{path: path, replies: replies}
	for _, rep := range replies {
		if _, err := os.Stat("testdata/" + rep.File); err != nil {
			t.Fatal(err)
		}
	}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *Replay) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	r.mu.Lock()
	n := len(r.reqs)
	r.reqs = append(r.reqs, Request{Path: req.URL.Path, Header: req.Header.Clone(), Raw: string(raw), Body: body})
	r.mu.Unlock()
	if req.Method != http.MethodPost || req.URL.Path != r.path {
		http.Error(w, `{"error":{"message":"not found","type":"not_found_error"}}`, http.StatusNotFound)
		return
	}
	rep := r.replies[min(n, len(r.replies)-1)]
	data, err := os.ReadFile("testdata/" + rep.File)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	if !strings.HasSuffix(rep.File, ".sse") {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_0f3b8c2e9d7a4e1f")
		w.WriteHeader(status)
		_, _ = w.Write(data)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	fl, _ := w.(http.Flusher)
	for _, ev := range strings.SplitAfter(string(data), "\n\n") {
		_, _ = io.WriteString(w, ev)
		if fl != nil {
			fl.Flush()
		}
	}
}

// Requests returns what the server received so far.
func (r *Replay) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Private is the server's address for allow_private.
func (r *Replay) Private() string { return egress.AllowPrivateURL(r.URL) }

// Run runs g with a kernel holding v and returns the result and every
// event, one JSON object a line.
func Run(t testing.TB, g *graph.Graph, v Vault, in agent.Message) (*run.Result, string) {
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

// Everything is the result as JSON, its metadata and its events: all a
// user can see of a run.
func Everything(t testing.TB, res *run.Result, events string) string {
	t.Helper()
	j, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(res.Output.Metadata)
	return string(j) + "\n" + string(m) + "\n" + events
}
