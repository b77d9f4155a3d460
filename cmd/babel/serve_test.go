package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// server runs `babel serve` in-process on a free loopback port until the
// test ends (or stop is called).
type server struct {
	base   string
	config string
	graphs []string
	stop   func()
	done   chan int
}

func startServe(t *testing.T, graphs ...string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{base: "http://" + addr, done: make(chan int, 1)}
	var errb bytes.Buffer
	go func() {
		s.done <- executeContext(ctx, append([]string{"serve", "--listen", addr}, graphs...), strings.NewReader(""), io.Discard, &errb)
	}()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				t.Error("serve did not stop")
			}
		})
	}
	t.Cleanup(s.stop)
	for i := 0; i < 200; i++ {
		if resp, err := http.Get(s.base + "/healthz"); err == nil {
			resp.Body.Close()
			return s
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("serve did not come up: %s", errb.String())
	return nil
}

func (s *server) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func TestServeApprovalSurvivesRestartAndResumesOnce(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	f := writeFile(t, "p.yaml", `name: publish
nodes:
  - {name: draft, agent: builtin:upper}
  - {name: publish, agent: builtin:echo, effects: [write], approval: required}
`)
	s := startServe(t, f)
	code, run := s.do(t, "POST", "/v1/graphs/publish/runs", map[string]any{"input": "notes", "wait": true})
	if code != 200 || run["status"] != "awaiting_approval" {
		t.Fatalf("%d %v", code, run)
	}
	runID := run["run_id"].(string)
	s.stop() // a restart while the run awaits approval

	s = startServe(t, f)
	code, list := s.do(t, "GET", "/v1/approvals", nil)
	items, _ := list["approvals"].([]any)
	if code != 200 || len(items) != 1 {
		t.Fatalf("%d %v", code, list)
	}
	a := items[0].(map[string]any)
	if a["node"] != "publish" || a["run_id"] != runID || a["args"] != "NOTES" {
		t.Fatalf("the approver must see the exact call: %v", a)
	}
	id := a["id"].(string)
	if code, v := s.do(t, "POST", "/v1/approvals/"+id, map[string]any{"decision": "approve", "digest": "sha256:not-what-was-shown"}); code != 409 {
		t.Fatalf("a decision on another digest: %d %v", code, v)
	}
	if code, v := s.do(t, "POST", "/v1/approvals/"+id, map[string]any{"decision": "yes", "digest": a["digest"]}); code != 400 {
		t.Fatalf("a bad decision: %d %v", code, v)
	}
	code, v := s.do(t, "POST", "/v1/approvals/"+id, map[string]any{"decision": "approve", "digest": a["digest"]})
	if code != 200 || v["resumed"] != true {
		t.Fatalf("approve: %d %v", code, v)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, run = s.do(t, "GET", "/v1/runs/"+runID, nil)
		if run["status"] == "succeeded" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if run["status"] != "succeeded" || run["output"] != "NOTES" {
		t.Fatalf("after approval: %d %v", code, run)
	}
	if code, v := s.do(t, "POST", "/v1/approvals/"+id, map[string]any{"decision": "approve", "digest": a["digest"]}); code != 409 {
		t.Fatalf("a second decision: %d %v", code, v)
	}
	if code, _ := s.do(t, "POST", "/v1/approvals/nope", map[string]any{"decision": "approve", "digest": "sha256:x"}); code != 404 {
		t.Fatalf("unknown approval: %d", code)
	}
}

// slowPeer is a loopback HTTP peer that holds each request until the
// client goes away, and records when it saw the connection close.
type slowPeer struct {
	srv    *httptest.Server
	closed chan time.Time
}

func newSlowPeer(t *testing.T) *slowPeer {
	p := &slowPeer{closed: make(chan time.Time, 8)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body: only then does net/http watch the connection and
		// cancel r.Context() when the client goes away.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			p.closed <- time.Now()
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func slowGraph(t *testing.T, p *slowPeer) string {
	return writeFile(t, "slow.yaml", `name: slow
nodes:
  - name: call
    agent: {http: {url: "`+p.srv.URL+`/slow", method: POST}}
    allow_private: ["`+strings.TrimPrefix(p.srv.URL, "http://")+`"]
`)
}

func TestCancelClosesTheInFlightConnectionWithinASecond(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	p := newSlowPeer(t)
	s := startServe(t, slowGraph(t, p))
	code, v := s.do(t, "POST", "/v1/graphs/slow/runs", map[string]any{"input": map[string]any{"x": 1}})
	if code != 202 {
		t.Fatalf("%d %v", code, v)
	}
	id := v["run_id"].(string)
	time.Sleep(200 * time.Millisecond) // the call is in flight
	cancelled := time.Now()
	if code, v := s.do(t, "POST", "/v1/runs/"+id+"/cancel", nil); code != 200 && code != 202 {
		t.Fatalf("cancel: %d %v", code, v)
	}
	select {
	case at := <-p.closed:
		if d := at.Sub(cancelled); d > time.Second {
			t.Fatalf("the peer saw the connection close %v after the cancel", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the peer never saw the connection close")
	}
}

func TestKillSwitchOverRESTStopsRunsAndRefusesNewOnes(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	p := newSlowPeer(t)
	s := startServe(t, slowGraph(t, p))
	code, v := s.do(t, "POST", "/v1/graphs/slow/runs", map[string]any{"input": map[string]any{"x": 1}})
	if code != 202 {
		t.Fatalf("%d %v", code, v)
	}
	time.Sleep(200 * time.Millisecond)
	killed := time.Now()
	if code, v := s.do(t, "POST", "/v1/kill", map[string]any{"engage": true}); code != 200 || v["kill_switch"] != "engaged" {
		t.Fatalf("kill: %d %v", code, v)
	}
	select {
	case at := <-p.closed:
		if d := at.Sub(killed); d > time.Second {
			t.Fatalf("in-flight call stopped %v after the kill", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the kill switch did not stop the in-flight call")
	}
	code, v = s.do(t, "POST", "/v1/graphs/slow/runs", map[string]any{"input": map[string]any{"x": 1}, "wait": true})
	if code == 200 && v["status"] == "succeeded" {
		t.Fatalf("a run started while the kill switch is engaged: %v", v)
	}
	if code, v := s.do(t, "POST", "/v1/kill", map[string]any{"engage": "yes"}); code != 400 {
		t.Fatalf("a malformed kill: %d %v", code, v)
	}
	if code, _ := s.do(t, "POST", "/v1/kill", map[string]any{"engage": false}); code != 200 {
		t.Fatalf("release: %d", code)
	}
}
