package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"

	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/graph"
)

func TestMain(m *testing.M) {
	// The JS stdio client starts this test binary as its MCP server.
	if path := os.Getenv(envStdioGraphs); path != "" {
		os.Exit(serveStdioForTest(path))
	}
	goleak.VerifyTestMain(m, leaktest.Options(
		// testdata/graphs/sleepy.yaml's node ignores cancellation on purpose: the
		// runner abandons it at the deadline, and it sleeps on.
		goleak.IgnoreAnyFunction("github.com/babelagent/babel/builtin.Sleep.func1"),
	)...)
}

const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdefgh"
)

// loadGraphs compiles testdata/graphs/NAME.yaml for each name.
func loadGraphs(t testing.TB, names ...string) []*graph.Graph {
	t.Helper()
	var out []*graph.Graph
	for _, n := range names {
		spec, err := graph.LoadFile(filepath.Join("testdata", "graphs", n+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.Compile(spec, catalog.Registry(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// logBuffer is a concurrency-safe log sink for assertions on the server log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type testServer struct {
	t      testing.TB
	srv    *Server
	base   string
	host   string
	token  string
	log    *logBuffer
	client *http.Client
}

type serverSetup struct {
	cfg    Config
	tokens map[string]string // principal -> token; nil means alice and bob
	noAuth bool              // no tokens at all: a zero-config loopback server
	opts   Options
	extra  []*graph.Graph // graphs built in the test
}

// startServer serves graphs on a loopback port until the test ends.
func startServer(t testing.TB, setup serverSetup, graphs ...string) *testServer {
	t.Helper()
	logs := &logBuffer{}
	opts := setup.opts
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if !setup.noAuth {
		m := setup.tokens
		if m == nil {
			m = map[string]string{"alice": aliceToken, "bob": bobToken}
		}
		tok, err := NewTokens(m)
		if err != nil {
			t.Fatal(err)
		}
		opts.Tokens = tok
	}
	cfg := setup.cfg
	cfg.Listen = "127.0.0.1:0"
	srv, err := New(append(loadGraphs(t, graphs...), setup.extra...), &cfg, &opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := srv.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	ts := &testServer{t: t, srv: srv, base: "http://" + ln.Addr().String(), host: ln.Addr().String(), log: logs,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}}
	if !setup.noAuth {
		ts.token = aliceToken
	}
	t.Cleanup(func() {
		ts.client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("the server did not stop")
		}
	})
	return ts
}

// do sends a request as token (empty: none) and returns status, headers, body.
func (ts *testServer) do(method, path, token string, body any, hdr ...string) (int, http.Header, []byte) {
	ts.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.base+path, r)
	if err != nil {
		ts.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

// raw sends bytes on a fresh connection and returns what comes back.
func (ts *testServer) raw(req string) string {
	ts.t.Helper()
	c, err := net.DialTimeout("tcp", ts.host, 5*time.Second)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		ts.t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// runShape is the part of the run shape the tests read.
type runShape struct {
	RunID         string          `json:"run_id"`
	Graph         string          `json:"graph"`
	Principal     string          `json:"principal"`
	Status        string          `json:"status"`
	Output        json.RawMessage `json:"output"`
	Error         string          `json:"error"`
	ErrorCode     string          `json:"error_code"`
	CorrelationID string          `json:"correlation_id"`
	Trace         []struct {
		Node   string `json:"node"`
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"trace"`
	Labels []string `json:"labels"`
}

func decodeRun(t testing.TB, b []byte) runShape {
	t.Helper()
	var r runShape
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not a run: %v: %s", err, b)
	}
	return r
}

type errorShape struct {
	Error struct {
		Code          string `json:"code"`
		Message       string `json:"message"`
		CorrelationID string `json:"correlation_id"`
	} `json:"error"`
}

func decodeError(t testing.TB, b []byte) errorShape {
	t.Helper()
	var e errorShape
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not an error body: %s", b)
	}
	if e.Error.CorrelationID == "" {
		t.Errorf("error without a correlation id: %s", b)
	}
	return e
}

// waitRun polls a run until it leaves "running".
func (ts *testServer) waitRun(id, token string) runShape {
	ts.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		code, _, b := ts.do("GET", "/v1/runs/"+id, token, nil)
		if code != http.StatusOK {
			ts.t.Fatalf("GET run: %d %s", code, b)
		}
		r := decodeRun(ts.t, b)
		if r.Status != "running" {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.t.Fatalf("run %s did not finish", id)
	return runShape{}
}

func readFiles(paths ...string) (string, error) {
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}
