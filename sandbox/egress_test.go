package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// fetchScript fetches each URL of argv through the environment's proxy
// (urllib honours HTTP_PROXY) and, for each "connect:host:port" argument,
// opens a CONNECT tunnel by hand and sends a plain GET through it. It
// prints one JSON object: what each target gave, and the proxy variables it
// saw.
const fetchScript = `import json, os, socket, sys, urllib.request, urllib.error
out = {"env": {k: v for k, v in os.environ.items() if "proxy" in k.lower()}, "results": []}
for t in sys.argv[1:]:
    r = {"target": t}
    try:
        if t.startswith("connect:"):
            hp = t[len("connect:"):]
            s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
            s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hp, hp)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
            status = int(head.split(b" ")[1])
            r["status"] = status
            if status == 200:
                s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % hp).encode())
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                r["body"] = data.split(b"\r\n\r\n", 1)[1].decode()
            s.close()
        elif t.startswith("direct:"):
            host, port = t[len("direct:"):].rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=3).close()
            r["status"] = "connected"
        else:
            with urllib.request.urlopen(t, timeout=10) as resp:
                r["status"] = resp.status
                r["body"] = resp.read().decode()
    except urllib.error.HTTPError as e:
        r["status"] = e.code
        r["error"] = e.read().decode()
    except Exception as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
    out["results"].append(r)
print(json.dumps(out))
`

type fetchOutput struct {
	Env     map[string]string `json:"env"`
	Results []struct {
		Target string `json:"target"`
		Status any    `json:"status"`
		Body   string `json:"body"`
		Error  string `json:"error"`
	} `json:"results"`
}

// countingServer is an httptest server that counts the connections it sees.
func countingServer(t *testing.T, body string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func runFetch(t *testing.T, opts *egress.Options, targets ...string) (fetchOutput, *Result) {
	t.Helper()
	spec := Python(fetchScript)
	spec.Args = append(spec.Args, targets...)
	spec.Egress = opts
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	res, err := testSB.os.Run(ctx, spec)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	var out fetchOutput
	if err := json.Unmarshal(res.Stdout, &out); err != nil {
		t.Fatalf("output %q: %v (stderr %s)", res.Stdout, err, res.Stderr)
	}
	if len(out.Results) != len(targets) {
		t.Fatalf("results %+v", out.Results)
	}
	return out, res
}

func hostPort(u string) string { return strings.TrimPrefix(u, "http://") }

func TestCodeReachesDeclaredHostThroughEgressProxy(t *testing.T) {
	noLeaks(t)
	declared, declaredConns := countingServer(t, "declared-body")
	undeclared, undeclaredConns := countingServer(t, "undeclared-body")
	opts := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(declared.URL)}}
	out, res := runFetch(t, opts,
		declared.URL+"/x",
		"connect:"+hostPort(declared.URL),
		undeclared.URL+"/x",
		"connect:"+hostPort(undeclared.URL),
		"http://169.254.169.254/latest/meta-data/",
		"connect:169.254.169.254:80",
		"http://example.com/",
	)
	if out.Env["HTTP_PROXY"] != "http://"+ProxyAddr || out.Env["https_proxy"] != "http://"+ProxyAddr {
		t.Errorf("proxy environment = %v", out.Env)
	}
	r := out.Results
	for _, i := range []int{0, 1} {
		if fmt.Sprint(r[i].Status) != "200" || r[i].Body != "declared-body" {
			t.Errorf("declared target %s: %+v", r[i].Target, r[i])
		}
	}
	for _, i := range []int{2, 3, 4, 5, 6} {
		if fmt.Sprint(r[i].Status) != "403" {
			t.Errorf("target %s was not refused: %+v", r[i].Target, r[i])
		}
	}
	if !strings.Contains(r[2].Error, "loopback") || !strings.Contains(r[4].Error, "link-local") || !strings.Contains(r[6].Error, "not in allowlist") {
		t.Errorf("refusals do not say why: %q / %q / %q", r[2].Error, r[4].Error, r[6].Error)
	}
	if n := undeclaredConns.Load(); n != 0 {
		t.Errorf("the undeclared listener saw %d connections", n)
	}
	if n := declaredConns.Load(); n != 2 {
		t.Errorf("the declared listener saw %d connections, want 2", n)
	}
	if res.Egress.Refused != 5 || res.Egress.Received == 0 || res.Egress.Sent == 0 {
		t.Errorf("egress stats = %+v", res.Egress)
	}
}

func TestCodeWithoutEgressHasNoNetwork(t *testing.T) {
	noLeaks(t)
	srv, conns := countingServer(t, "body")
	out, _ := runFetch(t, nil, srv.URL+"/x", "direct:"+hostPort(srv.URL), "direct:"+ProxyAddr, "direct:1.1.1.1:80")
	if len(out.Env) != 0 {
		t.Errorf("proxy variables without egress: %v", out.Env)
	}
	for _, r := range out.Results {
		if r.Error == "" || r.Body != "" {
			t.Errorf("%s reached: %+v", r.Target, r)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}

func TestEgressProxyClosesWithTheSandbox(t *testing.T) {
	noLeaks(t)
	// The program holds a tunnel open and is killed by its wall clock: the
	// proxy's connections and goroutines must still go.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	spec := Python(`import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT ` + hostPort(hang.URL) + ` HTTP/1.1\r\n\r\n")
print(s.recv(100), flush=True)
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(60)
`)
	spec.Egress = &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(hang.URL)}}
	spec.Limits.WallClock = 3 * time.Second
	res, err := testSB.os.Run(context.Background(), spec)
	if l, ok := IsLimit(err); !ok || l != LimitWallClock {
		t.Fatalf("err = %v, want the wall clock limit", err)
	}
	if !strings.Contains(string(res.Stdout), "200") {
		t.Errorf("the tunnel was not established: %q %q", res.Stdout, res.Stderr)
	}
}

func TestWasmModuleRefusesEgress(t *testing.T) {
	spec := WasmModule(fixtureExit(0))
	spec.Egress = &egress.Options{Allowlist: []string{"example.com"}}
	if _, err := testSB.wasm.Run(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "no sockets") {
		t.Fatalf("err = %v", err)
	}
}

// noLeaks fails the test if goroutines it started outlive it. Registered
// first, it runs after every other cleanup (the test's servers close first).
// QuickJS, compiling in the background since TestMain, starts workers of
// its own meanwhile.
func noLeaks(t *testing.T) {
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/tetratelabs/wazero/internal/engine/wazevo.(*engine).compileModule.func1"),
		goleak.IgnoreAnyFunction("github.com/babelagent/babel/sandbox.(*Wasm).compile.func1"),
		goleak.IgnoreAnyFunction("github.com/babelagent/babel/sandbox.(*Wasm).jsTemplate.func1"),
	}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// egressMeter is a run's egress budget, as the kernel's Budget keeps it.
type egressMeter struct {
	max, used atomic.Int64
}

func (m *egressMeter) Tokens(int64) error { return nil }
func (m *egressMeter) TokensLeft() bool   { return true }
func (m *egressMeter) Egress(n int64) error {
	if m.used.Add(n) > m.max.Load() {
		return fmt.Errorf("limit exceeded: egress bytes (max %d)", m.max.Load())
	}
	return nil
}

// Code's traffic through the egress proxy is charged to the run's egress
// budget, as an http node's is: past it the proxy cuts the connection and
// the call fails with the budget's error.
func TestEgressProxyChargesTheRunsBudget(t *testing.T) {
	noLeaks(t)
	big := strings.Repeat("x", 256<<10)
	srv, _ := countingServer(t, big)
	opts := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}
	run := func(max int64) (*Result, *egressMeter, error) {
		m := &egressMeter{}
		m.max.Store(max)
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		ctx = agent.WithCall(ctx, &agent.CallContext{Meter: m})
		spec := Python(fetchScript)
		spec.Args = append(spec.Args, srv.URL+"/big")
		spec.Egress = opts
		res, err := testSB.os.Run(ctx, spec)
		return res, m, err
	}
	res, m, err := run(1 << 30)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("within budget: %v (stderr %s)", err, res.Stderr)
	}
	if got := m.used.Load(); got < int64(len(big)) || got != res.Egress.Sent+res.Egress.Received {
		t.Fatalf("charged %d bytes; the body is %d and the proxy counted %+v", got, len(big), res.Egress)
	}
	_, _, err = run(64 << 10)
	if err == nil || !strings.Contains(err.Error(), "egress bytes") {
		t.Fatalf("over budget: err = %v, want the budget's error", err)
	}
}
