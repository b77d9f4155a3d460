package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// downstream is a real HTTP peer on loopback that counts what reaches it
// and keeps the Authorization headers it saw.
type downstream struct {
	srv   *httptest.Server
	hits  atomic.Int32
	mu    sync.Mutex
	auths []string
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.hits.Add(1)
		d.mu.Lock()
		d.auths = append(d.auths, r.Header.Get("Authorization"))
		d.mu.Unlock()
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(d.srv.Close)
	return d
}

type bearerRT struct {
	token string
	base  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func (s *server) call(t *testing.T, method, path, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// serveWith starts `babel serve` with a token file and a policy file.
func serveWith(t *testing.T, policy string, graph string) *server {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("mallory tok-mallory-0123456789\nci-bot tok-cibot-0123456789\n"), 0o600)
	pol := filepath.Join(dir, "policy.yaml")
	os.WriteFile(pol, []byte(policy), 0o600)
	cfg := filepath.Join(dir, "babel.yaml")
	os.WriteFile(cfg, []byte("policy_file: "+pol+"\n"), 0o600)
	s := startServe(t, "--config", cfg, "--token-file", tokens, graph)
	s.config, s.graphs = cfg, []string{graph}
	return s
}

func hookGraph(t *testing.T, d *downstream) string {
	return writeFile(t, "hook.yaml", `name: hook
nodes:
  - name: notify
    agent: {http: {url: "`+d.srv.URL+`/hook", method: POST}}
    allow_private: ["`+strings.TrimPrefix(d.srv.URL, "http://")+`"]
`)
}

func TestDenyAllPolicyBlocksEveryDoorWithNoSideEffect(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	d := newDownstream(t)
	s := serveWith(t, "principals: {}\nroles: {}\n", hookGraph(t, d))
	tok := "tok-mallory-0123456789"

	if code := s.call(t, "POST", "/v1/graphs/hook/runs", tok, `{"input": {"x": 1}, "wait": true}`); code != 403 && code != 404 {
		t.Errorf("REST: %d, want 403 or 404", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{token: tok, base: http.DefaultTransport}}}, nil)
	if err == nil {
		tools, _ := sess.ListTools(ctx, nil)
		if tools != nil && len(tools.Tools) > 0 {
			t.Errorf("MCP lists %d tools to a principal with no grant", len(tools.Tools))
		}
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "hook", Arguments: map[string]any{"x": 1}})
		if err == nil && !res.IsError {
			t.Errorf("MCP call succeeded under deny-all")
		}
		sess.Close()
	}
	// A2A: the agent card shows no skill to this caller, and a send runs nothing.
	s.call(t, "POST", "/a2a/v0.3", tok, `{"jsonrpc":"2.0","id":"1","method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"data","data":{"graph":"hook","input":{"x":1}}}]}}}`)
	// The CLI door: the local user is not in this policy either.
	s.stop()
	if code, _, errs := babel(t, "", "run", "--config", s.config, s.graphs[0], "--input", `{"x":1}`); code != 3 {
		t.Errorf("CLI: exit %d, want 3 (denied): %s", code, errs)
	}
	if n := d.hits.Load(); n != 0 {
		t.Fatalf("the downstream saw %d requests under a deny-all policy", n)
	}
}

func TestCallerTokenNeverReachesDownstream(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	d := newDownstream(t)
	s := serveWith(t, `principals:
  ci-bot: {kind: token, roles: [runner]}
roles:
  runner: {allow: [{action: graph.run, graphs: ["hook"]}, {action: run.read}]}
`, hookGraph(t, d))
	if code := s.call(t, "POST", "/v1/graphs/hook/runs", "tok-cibot-0123456789", `{"input": {"x": 1}, "wait": true}`); code != 200 {
		t.Fatalf("granted run: %d", code)
	}
	if d.hits.Load() != 1 {
		t.Fatalf("downstream hits %d, want 1", d.hits.Load())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.auths {
		if strings.Contains(a, "tok-cibot") {
			t.Fatalf("the caller's token reached the downstream: %q", a)
		}
	}
}
