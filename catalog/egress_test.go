package catalog_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/egress"
)

// pyFetch fetches each URL of its input list and reports, per URL, the
// body or the error, and the proxy variables it saw.
const pyFetch = `import json, os, sys, urllib.request, urllib.error
out = {"env": sorted(k for k in os.environ if "proxy" in k.lower()), "got": []}
for u in json.load(sys.stdin):
    try:
        with urllib.request.urlopen(u, timeout=10) as r:
            out["got"].append(r.read().decode())
    except urllib.error.HTTPError as e:
        out["got"].append("HTTP %d" % e.code)
    except Exception as e:
        out["got"].append("error: %s" % type(e).__name__)
print(json.dumps(out))
`

func loopbackServer(t *testing.T, body string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestPythonCodeNodeReachesOnlyItsDeclaredEgress(t *testing.T) {
	declared, _ := loopbackServer(t, "declared-body")
	undeclared, undeclaredConns := loopbackServer(t, "undeclared-body")
	g := mustCompile(t, catalog.Registry(nil), oneNode(`{code: {lang: python, source: `+strconv.Quote(pyFetch)+`}}`,
		`egress: ["127.0.0.1"]`, `allow_private: ["`+egress.AllowPrivateURL(declared.URL)+`"]`))
	if c := g.Nodes[0].Card; !c.Has(agent.EffectEgress) || !slices.Equal(c.Egress, []string{"127.0.0.1"}) {
		t.Errorf("card %+v: want the egress effect and the declared hosts", c)
	}
	in, _ := json.Marshal([]string{declared.URL + "/a", undeclared.URL + "/b", "http://169.254.169.254/latest/meta-data/"})
	res := runGraph(t, g, string(in))
	raw, _ := res.Output.Value()
	var out struct {
		Env []string `json:"env"`
		Got []string `json:"got"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	if want := []string{"declared-body", "HTTP 403", "HTTP 403"}; !slices.Equal(out.Got, want) {
		t.Errorf("got %q, want %q", out.Got, want)
	}
	if len(out.Env) != 4 {
		t.Errorf("proxy variables %v", out.Env)
	}
	if n := undeclaredConns.Load(); n != 0 {
		t.Errorf("the undeclared listener saw %d connections", n)
	}
}

func TestCodeNodeWithoutEgressHasNoNetwork(t *testing.T) {
	srv, conns := loopbackServer(t, "body")
	g := mustCompile(t, catalog.Registry(nil), oneNode(`{code: {lang: python, source: `+strconv.Quote(pyFetch)+`}}`))
	if c := g.Nodes[0].Card; c.Has(agent.EffectEgress) {
		t.Errorf("card %+v has the egress effect", c)
	}
	in, _ := json.Marshal([]string{srv.URL + "/a"})
	raw, _ := runGraph(t, g, string(in)).Output.Value()
	if s := string(raw); !strings.Contains(s, `"env": []`) || !strings.Contains(s, "error: URLError") {
		t.Errorf("output %s: want no proxy variable and a failed connection", s)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}

// jsFetch fetches each URL of its input list and reports, per URL, the
// body or the error, and whether fetch exists at all.
const jsFetch = `(async () => {
  const out = { fetch: typeof fetch, got: [] };
  if (typeof fetch !== "function") return out;
  for (const u of input) {
    try { out.got.push(await (await fetch(u)).text()); } catch (e) { out.got.push(String(e)); }
  }
  return out;
})()`

type jsFetchOutput struct {
	Fetch string   `json:"fetch"`
	Got   []string `json:"got"`
}

func TestJSCodeNodeReachesOnlyItsDeclaredEgress(t *testing.T) {
	declared, _ := loopbackServer(t, "declared-body")
	undeclared, undeclaredConns := loopbackServer(t, "undeclared-body")
	g := mustCompile(t, catalog.Registry(nil), oneNode(`{code: {lang: js, source: `+strconv.Quote(jsFetch)+`}}`,
		`egress: ["127.0.0.1"]`, `allow_private: ["`+egress.AllowPrivateURL(declared.URL)+`"]`))
	if c := g.Nodes[0].Card; !c.Has(agent.EffectEgress) || !slices.Equal(c.Egress, []string{"127.0.0.1"}) || c.Kind != "wasm" {
		t.Errorf("card %+v: want a wasm card with the egress effect and the declared hosts", c)
	}
	in, _ := json.Marshal([]string{declared.URL + "/a", undeclared.URL + "/b", "http://169.254.169.254/latest/meta-data/"})
	raw, _ := runGraph(t, g, string(in)).Output.Value()
	var out jsFetchOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	if len(out.Got) != 3 || out.Got[0] != "declared-body" || !strings.Contains(out.Got[1], "loopback address") || !strings.Contains(out.Got[2], "link-local address") {
		t.Errorf("got %q, want the declared body and two refusals", out.Got)
	}
	if n := undeclaredConns.Load(); n != 0 {
		t.Errorf("the undeclared listener saw %d connections", n)
	}
}

func TestJSCodeNodeWithoutEgressHasNoFetch(t *testing.T) {
	srv, conns := loopbackServer(t, "body")
	g := mustCompile(t, catalog.Registry(nil), oneNode(`{code: {lang: js, source: `+strconv.Quote(jsFetch)+`}}`))
	if c := g.Nodes[0].Card; c.Has(agent.EffectEgress) {
		t.Errorf("card %+v has the egress effect", c)
	}
	in, _ := json.Marshal([]string{srv.URL + "/a"})
	raw, _ := runGraph(t, g, string(in)).Output.Value()
	if s := string(raw); s != `{"fetch":"undefined","got":[]}` {
		t.Errorf("output %s: want no fetch", s)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}

func TestWasmCodeNodeCannotDeclareEgress(t *testing.T) {
	dir := nopWasmDir(t)
	_, err := compile(t, catalog.Registry(&catalog.Options{Dir: dir}), oneNode(`{code: {file: nop.wasm}}`, `egress: ["api.example.com"]`))
	if err == nil || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("compile: %v; want a refusal naming that a wasm module has no network", err)
	}
}
