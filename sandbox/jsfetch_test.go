package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/internal/loopback"
)

// runJSEgress runs code with input as stdin and opts as its egress, and
// returns its value decoded into out.
func runJSEgress(t *testing.T, ctx context.Context, code string, input any, opts *egress.Options, out any) *Result {
	t.Helper()
	spec := JavaScript(code)
	spec.Stdin, _ = json.Marshal(input)
	spec.Egress = opts
	res, err := testSB.wasm.Run(ctx, spec)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err := json.Unmarshal(res.Value, out); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	return res
}

// jsTryFetch fetches each URL of input and gives, per URL, the status and
// body, or the error.
const jsTryFetch = `(async () => {
  const out = [];
  for (const u of input) {
    try {
      const r = await fetch(u);
      out.push({ status: r.status, body: await r.text(), location: r.headers.get("location") });
    } catch (e) {
      out.push({ error: String(e) });
    }
  }
  return out;
})()`

type jsFetchResult struct {
	Status   int    `json:"status"`
	Body     string `json:"body"`
	Location string `json:"location"`
	Error    string `json:"error"`
}

func TestJSFetchReachesOnlyDeclaredEgress(t *testing.T) {
	noLeaks(t)
	var seen atomic.Value
	declared := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.Store(fmt.Sprintf("%s %s %s %s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Test"), body))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"answer": 42}`)
	}))
	t.Cleanup(declared.Close)
	undeclared, undeclaredConns := countingServer(t, "undeclared-body")
	opts := &egress.Options{Allowlist: []string{"127.0.0.1", "api.example.com"}, AllowPrivate: []string{egress.AllowPrivateURL(declared.URL)}}

	code := `(async () => {
  const r = await fetch(input.declared + "/x?q=1", { method: "post", headers: { "X-Test": "yes" }, body: "hello" });
  const first = [r.status, r.ok, r.statusText, r.headers.get("content-type"), r.headers.get("x-multi"), await r.json()];
  let again;
  try { await r.text(); } catch (e) { again = String(e); }
  const h = new Headers([["X-Test", "pairs"]]);
  const r2 = await fetch(input.declared, { headers: h });
  const refused = [];
  for (const u of input.refused) {
    try { await fetch(u); refused.push("reached " + u); } catch (e) { refused.push(e instanceof TypeError ? String(e) : "not a TypeError: " + e); }
  }
  return { first, again, second: await r2.text(), refused };
})()`
	var out struct {
		First   []any    `json:"first"`
		Again   string   `json:"again"`
		Second  string   `json:"second"`
		Refused []string `json:"refused"`
	}
	in := map[string]any{
		"declared": declared.URL,
		"refused": []string{
			undeclared.URL + "/x",                      // loopback, not opted in
			"http://169.254.169.254/latest/meta-data/", // link-local: cloud metadata
			"http://example.com/",                      // not on the allowlist
			"ftp://api.example.com/",
		},
	}
	res := runJSEgress(t, context.Background(), code, in, opts, &out)
	if got := fmt.Sprint(out.First); got != "[201 true Created application/json a, b map[answer:42]]" {
		t.Errorf("first response %s", got)
	}
	if s, _ := seen.Load().(string); s != "GET / pairs " {
		t.Errorf("the second request arrived as %q", s)
	}
	if !strings.Contains(out.Again, "already read") {
		t.Errorf("reading a body twice: %q", out.Again)
	}
	if out.Second != `{"answer": 42}` {
		t.Errorf("second response %q", out.Second)
	}
	want := []string{"loopback", "link-local", "not in allowlist", "scheme"}
	for i, r := range out.Refused {
		if !strings.HasPrefix(r, "TypeError: fetch: ") || !strings.Contains(r, want[i]) {
			t.Errorf("%s: %q, want a TypeError naming %q", in["refused"].([]string)[i], r, want[i])
		}
	}
	if n := undeclaredConns.Load(); n != 0 {
		t.Errorf("the undeclared listener saw %d connections", n)
	}
	if res.Egress.Refused != 4 || res.Egress.Sent == 0 || res.Egress.Received == 0 {
		t.Errorf("egress stats = %+v", res.Egress)
	}
}

func TestJSFetchSendsWhatTheCodeAsked(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%s %s ct=%s x=%s body=%s", r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), r.Header.Values("X-A"), body)
	}))
	t.Cleanup(srv.Close)
	opts := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}
	var status int
	runJSEgress(t, context.Background(), `fetch(input + "/p?a=1", { method: "PUT", headers: [["Content-Type", "application/json"], ["X-A", "1"], ["X-A", "2"]], body: JSON.stringify({ k: "v" }) }).then(r => r.status)`,
		srv.URL, opts, &status)
	if s := <-got; s != `PUT /p?a=1 ct=application/json x=[1 2] body={"k":"v"}` || status != 200 {
		t.Fatalf("server saw %q, status %d", s, status)
	}
}

// Every blocked vector (as written, and aimed at a live listener), with an
// allowlist that names its host and a resolver that answers loopback for
// any name, is refused by the egress guard's address rules, and nothing
// reaches the listener.
func TestJSFetchRefusesBlockedVectors(t *testing.T) {
	t.Parallel()
	witness, conns := countingServer(t, "witness")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(witness.URL, "http://"))
	vectors := loopback.Vectors(t, "../egress/testdata/ssrf-blocked.txt")
	if len(vectors) < 20 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	var targets, allow []string
	for _, raw := range vectors {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, raw)
		if u.Hostname() != "" {
			allow = append(allow, u.Hostname())
			aimed := *u
			aimed.Host = net.JoinHostPort(u.Hostname(), port)
			targets = append(targets, aimed.String())
		}
	}
	// An allowed name that resolves to loopback is refused when dialed.
	targets = append(targets, "http://allowed.example:"+port+"/")
	allow = append(allow, "allowed.example")
	opts := &egress.Options{Allowlist: allowable(allow), Resolver: loopback.StaticResolver{IP: net.IPv4(127, 0, 0, 1)}}
	var out []jsFetchResult
	runJSEgress(t, context.Background(), jsTryFetch, targets, opts, &out)
	if len(out) != len(targets) {
		t.Fatalf("%d results for %d targets", len(out), len(targets))
	}
	for i, r := range out {
		if !strings.Contains(r.Error, "fetch: egress refused") || strings.Contains(r.Error, "host not in allowlist") {
			t.Errorf("%s: %+v, want a refusal by the address rules", targets[i], r)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}

// allowable keeps the host names an allowlist accepts.
func allowable(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if _, err := egress.New(&egress.Options{Allowlist: []string{h}}); err == nil {
			out = append(out, h)
		}
	}
	return out
}

func TestJSFetchDoesNotFollowRedirectsAndCapsBodies(t *testing.T) {
	t.Parallel()
	undeclared, undeclaredConns := countingServer(t, "undeclared-body")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, undeclared.URL+"/", http.StatusFound)
		case "/big":
			fmt.Fprint(w, strings.Repeat("x", 4096))
		default:
			fmt.Fprint(w, strings.Repeat("y", 1024))
		}
	}))
	t.Cleanup(srv.Close)
	opts := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}, MaxResponseBytes: 1024}
	var out []jsFetchResult
	runJSEgress(t, context.Background(), jsTryFetch, []string{srv.URL + "/redirect", srv.URL + "/big", srv.URL + "/fits"}, opts, &out)
	if r := out[0]; r.Status != http.StatusFound || r.Location != undeclared.URL+"/" || r.Error != "" {
		t.Errorf("redirect: %+v, want the 302 itself", r)
	}
	if r := out[1]; !strings.Contains(r.Error, "exceeds the 1024-byte limit") {
		t.Errorf("big body: %+v, want the size cap", r)
	}
	if r := out[2]; r.Status != 200 || len(r.Body) != 1024 {
		t.Errorf("body at the cap: status %d, %d bytes, error %q", r.Status, len(r.Body), r.Error)
	}
	if n := undeclaredConns.Load(); n != 0 {
		t.Errorf("the redirect target saw %d connections", n)
	}
}

func TestJSFetchStopsWithTheCall(t *testing.T) {
	noLeaks(t)
	gone := make(chan struct{}, 2)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		gone <- struct{}{}
	}))
	t.Cleanup(hang.Close)
	opts := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(hang.URL)}}
	code := `fetch(` + jsString(hang.URL) + `).then(r => r.text())`

	t.Run("deadline", func(t *testing.T) {
		spec := JavaScript(code)
		spec.Egress, spec.Limits.WallClock = opts, 500*time.Millisecond
		start := time.Now()
		_, err := testSB.wasm.Run(context.Background(), spec)
		wantLimit(t, err, LimitWallClock)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("returned after %v", d)
		}
		waitGone(t, gone)
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		spec := JavaScript(code)
		spec.Egress = opts
		start := time.Now()
		_, err := testSB.wasm.Run(ctx, spec)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("returned after %v", d)
		}
		waitGone(t, gone)
	})
}

func waitGone(t *testing.T, gone chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the request in flight was not stopped")
	}
}

// egressBudget is a run's meter with an egress budget.
type egressBudget struct{ left atomic.Int64 }

func (*egressBudget) Tokens(int64) error { return nil }
func (*egressBudget) TokensLeft() bool   { return true }
func (b *egressBudget) Egress(n int64) error {
	if b.left.Add(-n) < 0 {
		return errors.New("egress budget spent")
	}
	return nil
}

func TestJSFetchChargesTheEgressBudget(t *testing.T) {
	t.Parallel()
	srv, conns := countingServer(t, strings.Repeat("z", 800))
	opts := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}
	b := &egressBudget{}
	b.left.Store(1000)
	ctx := agent.WithMeter(context.Background(), b)
	var out []jsFetchResult
	runJSEgress(t, ctx, jsTryFetch, []string{srv.URL, srv.URL}, opts, &out)
	if out[0].Status != 200 || !strings.Contains(out[1].Error, "egress budget spent") {
		t.Fatalf("results %+v, want the second fetch refused by the budget", out)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the server saw %d connections, want 1 (the refused request never left)", n)
	}
}

func TestJSWithoutEgressHasNoFetch(t *testing.T) {
	t.Parallel()
	res, err := runJS(t, `[typeof fetch, typeof Headers, typeof Response, typeof __babel_host, typeof __babel_run].join()`, "", nil)
	if err != nil || string(res.Value) != `"undefined,undefined,undefined,undefined,undefined"` {
		t.Fatalf("res %+v err %v", res, err)
	}
	// A call with egress does not leave fetch behind for the next one.
	srv, _ := countingServer(t, "ok")
	var body string
	runJSEgress(t, context.Background(), `fetch(input).then(r => r.text())`, srv.URL,
		&egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}, &body)
	if body != "ok" {
		t.Fatalf("body %q", body)
	}
	res, err = runJS(t, `typeof fetch`, "", nil)
	if err != nil || string(res.Value) != `"undefined"` {
		t.Fatalf("after a call with egress: res %+v err %v", res, err)
	}
}

func TestJSEgressOptionsAreChecked(t *testing.T) {
	t.Parallel()
	spec := JavaScript(`1`)
	spec.Egress = &egress.Options{AllowPrivate: []string{"8.8.8.8:53"}}
	var se *SpecError
	if _, err := testSB.wasm.Run(context.Background(), spec); !errors.As(err, &se) || se.Field != "Egress" {
		t.Fatalf("err = %v, want a SpecError on Egress", err)
	}
}

// Were code without egress to reach the harness's fetch, the host function
// still refuses: the call's context holds no jsFetcher.
func TestJSHostFunctionRefusesACallWithoutEgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tpl, err := testSB.wasm.jsTemplate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv, conns := countingServer(t, "body")
	spec := JavaScript(`fetch(input).then(r => r.text())`)
	spec.Stdin = []byte(jsString(srv.URL))
	// Egress set makes the harness define fetch; runQuickJS without runJS
	// puts no jsFetcher in the context.
	spec.Egress = &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}
	res, err := testSB.wasm.exec(ctx, spec, tpl.cm, nil, func(ctx context.Context, mod api.Module, spec *Spec, lim Limits, stderr io.Writer) (int, []byte, error) {
		return runQuickJS(ctx, mod, tpl, spec, lim, stderr)
	})
	if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "TypeError: fetch: this code declares no egress") {
		t.Fatalf("res %+v (stderr %s) err %v", res, res.Stderr, err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}
