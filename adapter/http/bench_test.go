package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
)

// The adapter's overhead over a raw net/http request to the same loopback
// server: compare BenchmarkHTTPAdapter (one node call through kernel.Invoke,
// the path every node and tool call takes) and BenchmarkRawHTTP, run
// together:
//
//	go test -run '^$' -bench 'HTTP' -benchmem ./adapter/http/

const benchBody = `{"ticket":"my card was charged twice","priority":2}`

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"labels":["billing","urgent"],"score":0.93}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func BenchmarkRawHTTP(b *testing.B) {
	srv := benchServer(b)
	tr := &http.Transport{}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/labels", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !json.Valid(out) {
			b.Fatalf("status %d err %v", resp.StatusCode, err)
		}
	}
}

func BenchmarkHTTPAdapter(b *testing.B) {
	srv := benchServer(b)
	g := mustCompile(b, fmt.Sprintf("name: bench\nnodes:\n  - name: labels\n    agent: {http: {url: %q}}\n    allow_private: [%q]\n",
		srv.URL+"/v1/labels", egressPrivate(srv.URL)), nil)
	k := kernel.New(nil)
	n := g.Nodes[0]
	in := agent.JSON([]byte(benchBody))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		// A fresh run each time, as each real call belongs to its own run
		// (the kernel's repeat breaker would stop one run repeating it).
		out, err := k.Invoke(ctx, &kernel.Call{Run: &kernel.Run{ID: "bench", Budget: kernel.NewBudget(0, 0)}, Node: n, Input: in, Attempt: 1})
		if err != nil || len(out.Parts) != 1 {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPAdapterRun is the same call as a one-node graph run through
// the scheduler, for scale.
func BenchmarkHTTPAdapterRun(b *testing.B) {
	srv := benchServer(b)
	g := mustCompile(b, fmt.Sprintf("name: bench\nnodes:\n  - name: labels\n    agent: {http: {url: %q}}\n    allow_private: [%q]\n",
		srv.URL+"/v1/labels", egressPrivate(srv.URL)), nil)
	r, err := run.NewRunner(nil)
	if err != nil {
		b.Fatal(err)
	}
	in := agent.JSON([]byte(benchBody))
	b.ReportAllocs()
	for b.Loop() {
		res := r.Run(context.Background(), &run.Request{Graph: g, Input: in})
		if res.Status != run.StatusSucceeded {
			b.Fatal(res.Error)
		}
	}
}
