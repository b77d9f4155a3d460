package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/babelagent/babel/graph"
)

// vectorTests maps each line of testdata/server-requests.txt (a copy of
// the shared vectors) to the test that shows the server refuses it.
var vectorTests = map[string]func(t *testing.T){
	"POST /v1/graphs/{g}/runs | Host: attacker.example                   => 403":                                                                  testForeignHostRefused,
	"POST /v1/graphs/{g}/runs | (no Host header)                          => 403":                                                                 testMissingHostRefused,
	"POST /v1/graphs/{g}/runs | Host: 127.0.0.1:{port}, body over the cap => 413":                                                                 testBodyOverCapRefused,
	"POST /v1/graphs/{g}/runs | Host: 127.0.0.1:{port}, body \"{not json\"  => 400":                                                               testMalformedBodyRefused,
	"POST /v1/graphs/{g}/runs | deadline_s = \"inf\", \"nan\", \"-1\", \"-inf\", \"0\" => 400":                                                    testBadDeadlinesRefused,
	"POST /v1/graphs/{g}/runs | deadline_s = 1e18 with a node that sleeps past the server ceiling => the run ends at the ceiling, not later":      testHugeDeadlineEndsAtCeiling,
	"POST /v1/graphs/{g}/runs | a node raises an error containing \"SENSITIVE_INTERNAL_PATH=/etc/secret\" => the response carries neither string": testInternalErrorNeverLeaves,
	"any non-loopback bind with no token configured => the server refuses to start":                                                               testNonLoopbackWithoutTokenRefused,
	"any request with a wrong or missing bearer token when a token is configured => 401":                                                          testWrongOrMissingTokenRefused,
}

func TestEveryServerRequestVectorIsRefused(t *testing.T) {
	f, err := os.Open("testdata/server-requests.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	seen := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seen++
		test, ok := vectorTests[line]
		if !ok {
			t.Errorf("no test for vector %q", line)
			continue
		}
		t.Run(line, test)
	}
	if seen != len(vectorTests) {
		t.Errorf("%d vectors in the file, %d tests", seen, len(vectorTests))
	}
}

func testForeignHostRefused(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	for _, host := range []string{"attacker.example", "attacker.example:" + port(ts), "127.0.0.1.nip.io:" + port(ts), "127.0.0.1:1"} {
		code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "x", "wait": true}, "Host", host)
		if code != http.StatusForbidden {
			t.Errorf("Host %s: got %d %s, want 403", host, code, b)
			continue
		}
		if e := decodeError(t, b); e.Error.Code != "forbidden" {
			t.Errorf("Host %s: code %q", host, e.Error.Code)
		}
	}
	// The same refusal guards MCP and A2A.
	for _, path := range []string{"/mcp", "/a2a", "/.well-known/agent-card.json", "/healthz"} {
		method := "POST"
		if path == "/.well-known/agent-card.json" || path == "/healthz" {
			method = "GET"
		}
		if code, _, _ := ts.do(method, path, aliceToken, "{}", "Host", "attacker.example"); code != http.StatusForbidden {
			t.Errorf("%s with a foreign Host: %d, want 403", path, code)
		}
	}
	// Loopback names with the bound port pass.
	for _, host := range []string{"127.0.0.1:" + port(ts), "localhost:" + port(ts), "LOCALHOST:" + port(ts), "[::1]:" + port(ts)} {
		if code, _, b := ts.do("GET", "/v1/graphs", aliceToken, nil, "Host", host); code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", host, code, b)
		}
	}
}

func port(ts *testServer) string {
	_, p, _ := net.SplitHostPort(ts.host)
	return p
}

func testMissingHostRefused(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	body := `{"input":"x","wait":true}`
	for name, req := range map[string]string{
		// HTTP/1.0 may omit Host; the request reaches the guard with none.
		"HTTP/1.0 without Host": "POST /v1/graphs/pipeline/runs HTTP/1.0\r\nAuthorization: Bearer " + aliceToken +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body,
		"HTTP/1.1 with an empty Host": "POST /v1/graphs/pipeline/runs HTTP/1.1\r\nHost: \r\nAuthorization: Bearer " + aliceToken +
			"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body,
	} {
		resp := ts.raw(req)
		if !strings.HasPrefix(resp, "HTTP/1.1 403 ") && !strings.HasPrefix(resp, "HTTP/1.0 403 ") {
			t.Errorf("%s: got %q, want 403", name, firstLine(resp))
		}
		if strings.Contains(resp, `"status":"succeeded"`) {
			t.Errorf("%s: the run ran", name)
		}
	}
	// HTTP/1.1 without any Host header is refused by net/http itself (400)
	// before any handler runs: nothing is served either way.
	resp := ts.raw("POST /v1/graphs/pipeline/runs HTTP/1.1\r\nAuthorization: Bearer " + aliceToken +
		"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	if strings.HasPrefix(resp, "HTTP/1.1 2") {
		t.Errorf("HTTP/1.1 without Host: %q, want a refusal", firstLine(resp))
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\r\n")
	return l
}

func testBodyOverCapRefused(t *testing.T) {
	ts := startServer(t, serverSetup{cfg: Config{MaxBodyBytes: 4096}}, "pipeline")
	big := `{"input":"` + strings.Repeat("a", 8192) + `"}`
	code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, big)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("with Content-Length: %d %s, want 413", code, b)
	}
	if e := decodeError(t, b); e.Error.Code != "body_too_large" {
		t.Errorf("code %q", e.Error.Code)
	}
	// Chunked, so no Content-Length warns of it: the cap still holds while reading.
	for _, path := range []string{"/v1/graphs/pipeline/runs", "/a2a", "/mcp"} {
		req, _ := http.NewRequest("POST", ts.base+path, io.MultiReader(strings.NewReader(big)))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.ContentLength = -1
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s chunked: %d %s, want 413", path, resp.StatusCode, rb)
		}
	}
	// The server stays up.
	if code, _, _ := ts.do("GET", "/healthz", "", nil); code != http.StatusOK {
		t.Errorf("healthz after refusals: %d", code)
	}
}

func testMalformedBodyRefused(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	cases := map[string]string{
		"{not json":                          "invalid_json",
		"":                                   "invalid_json",
		`{"input":"x"} trailing`:             "invalid_json",
		`["input"]`:                          "bad_request",
		`{"input":"x","wait":"yes"}`:         "bad_request",
		`{"input":"x","unknown":1}`:          "bad_request",
		`{"wait":true}`:                      "bad_request",
		`{"input":"x","deadline_s":{"s":1}}`: "invalid_deadline",
	}
	for body, want := range cases {
		code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, body)
		if code != http.StatusBadRequest {
			t.Errorf("%q: %d %s, want 400", body, code, b)
			continue
		}
		e := decodeError(t, b)
		if e.Error.Code != want {
			t.Errorf("%q: code %q, want %q (%s)", body, e.Error.Code, want, e.Error.Message)
		}
		if e.Error.Message == "" {
			t.Errorf("%q: no message", body)
		}
	}
	if code, _, _ := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, map[string]any{"input": "ok", "wait": true}); code != http.StatusOK {
		t.Errorf("a good request after bad ones: %d", code)
	}
}

func testBadDeadlinesRefused(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	for _, d := range []string{`"inf"`, `"nan"`, `"-1"`, `"-inf"`, `"0"`, `"10"`, `-1`, `0`, `-0.0`, `1e400`, `-1e400`, `1e-400`, `inf`, `nan`, `-inf`, `NaN`, `Infinity`} {
		body := `{"input":"x","wait":true,"deadline_s":` + d + `}`
		code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, body)
		if code != http.StatusBadRequest {
			t.Errorf("deadline_s %s: %d %s, want 400", d, code, b)
			continue
		}
		if e := decodeError(t, b); !strings.Contains(e.Error.Message, "deadline_s") && e.Error.Code != "invalid_json" {
			t.Errorf("deadline_s %s: the message does not name deadline_s: %s", d, e.Error.Message)
		}
	}
	if code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, `{"input":"x","wait":true,"deadline_s":2.5}`); code != http.StatusOK {
		t.Errorf("deadline_s 2.5: %d %s", code, b)
	}
}

func testHugeDeadlineEndsAtCeiling(t *testing.T) {
	const ceiling = 400 * time.Millisecond
	ts := startServer(t, serverSetup{cfg: Config{RunDeadline: graph.Duration(ceiling)}}, "sleepy")
	start := time.Now()
	code, _, b := ts.do("POST", "/v1/graphs/sleepy/runs", aliceToken, `{"input":"x","wait":true,"deadline_s":1e18}`)
	took := time.Since(start)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	r := decodeRun(t, b)
	if r.Status != "limit_exceeded" || r.ErrorCode != "limit_exceeded" {
		t.Errorf("status %q code %q, want limit_exceeded", r.Status, r.ErrorCode)
	}
	// The node sleeps 20s and ignores cancellation; the run ends at the
	// ceiling plus the runner's grace period.
	if took < ceiling || took > ceiling+2*time.Second {
		t.Errorf("the run took %v; the ceiling is %v", took, ceiling)
	}
}

func testInternalErrorNeverLeaves(t *testing.T) {
	ts := startServer(t, serverSetup{}, "leaky")
	leaks := func(what string, b []byte) {
		t.Helper()
		for _, s := range []string{"SENSITIVE_INTERNAL_PATH", "/etc/secret"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s carries %q: %s", what, s, b)
			}
		}
	}
	code, _, b := ts.do("POST", "/v1/graphs/leaky/runs", aliceToken, map[string]any{"input": "x", "wait": true})
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	leaks("the run", b)
	r := decodeRun(t, b)
	if r.Status != "failed" || r.ErrorCode != "node_failed" || r.CorrelationID == "" || !strings.Contains(r.Error, "boom") {
		t.Errorf("want a failed run naming node boom with a code and correlation id: %s", b)
	}
	_, _, b = ts.do("GET", "/v1/runs/"+r.RunID, aliceToken, nil)
	leaks("GET run", b)
	_, _, b = ts.do("GET", "/v1/runs/"+r.RunID+"/events", aliceToken, nil)
	leaks("the event stream", b)
	if !strings.Contains(string(b), "event: node.failed") {
		t.Errorf("no node.failed event: %s", b)
	}
	_, _, b = ts.do("GET", "/v1/runs", aliceToken, nil)
	leaks("the run list", b)
	// A2A and MCP answer from the same sanitized view.
	_, _, b = ts.do("POST", "/a2a", aliceToken, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x"}]}}}`)
	leaks("A2A", b)
	if !strings.Contains(string(b), "TASK_STATE_FAILED") {
		t.Errorf("A2A: want a failed task: %s", b)
	}
	// The full error is in the server log, under the correlation id.
	logs := ts.log.String()
	if !strings.Contains(logs, r.CorrelationID) || !strings.Contains(logs, "SENSITIVE_INTERNAL_PATH=/etc/secret") {
		t.Errorf("the server log lacks the full error under %s:\n%s", r.CorrelationID, logs)
	}
}

func testNonLoopbackWithoutTokenRefused(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.10:7077", "example.com:7077"} {
		srv, err := New(loadGraphs(t, "pipeline"), &Config{Listen: addr}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := srv.Listen(context.Background())
		if !errors.Is(err, ErrNoToken) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("listen %s without a token: %v, want ErrNoToken", addr, err)
		}
		_ = srv.Close(context.Background())
	}
	// A listener handed to Serve is checked too.
	srv, err := New(loadGraphs(t, "pipeline"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := srv.Serve(context.Background(), wildcardListener{ln}); !errors.Is(err, ErrNoToken) {
		t.Errorf("Serve on a wildcard address without a token: %v, want ErrNoToken", err)
	}
	// With a token, a non-loopback bind is allowed.
	tok, _ := NewTokens(map[string]string{"alice": aliceToken})
	srv, err = New(loadGraphs(t, "pipeline"), &Config{Listen: "0.0.0.0:0"}, &Options{Tokens: tok})
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := srv.Listen(context.Background())
	if err != nil {
		t.Fatalf("listen 0.0.0.0 with a token: %v", err)
	}
	ln2.Close()
	_ = srv.Close(context.Background())
}

// wildcardListener reports the unspecified address, as a 0.0.0.0 bind would.
type wildcardListener struct{ net.Listener }

func (wildcardListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero, Port: 7077} }

func testWrongOrMissingTokenRefused(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	routes := [][2]string{
		{"GET", "/v1/graphs"}, {"POST", "/v1/graphs/pipeline/runs"}, {"GET", "/v1/runs/x"}, {"GET", "/v1/runs/x/events"},
		{"POST", "/v1/runs/x/cancel"}, {"GET", "/v1/approvals"}, {"GET", "/v1/openapi.json"}, {"GET", "/metrics"},
		{"POST", "/mcp"}, {"POST", "/a2a"}, {"POST", "/a2a/v0.3"}, {"GET", "/.well-known/agent-card.json"}, {"GET", "/nowhere"},
	}
	for _, tok := range []string{"", "wrong-token-0123456789", aliceToken + "x", aliceToken[:len(aliceToken)-1], "Basic " + aliceToken} {
		for _, rt := range routes {
			var body any
			if rt[0] == "POST" {
				body = `{"input":"x"}`
			}
			code, h, b := ts.do(rt[0], rt[1], tok, body)
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d, want 401", rt[0], rt[1], tok, code)
				continue
			}
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: no WWW-Authenticate", rt[0], rt[1])
			}
			if e := decodeError(t, b); e.Error.Code != "unauthorized" {
				t.Errorf("code %q", e.Error.Code)
			}
		}
	}
	// The scheme is case-insensitive; health needs no token.
	if code, _, _ := ts.do("GET", "/v1/graphs", "", nil, "Authorization", "bearer "+aliceToken); code != http.StatusOK {
		t.Errorf("lower-case bearer: %d", code)
	}
	if code, _, _ := ts.do("GET", "/healthz", "", nil); code != http.StatusOK {
		t.Errorf("healthz without a token: %d", code)
	}
}

func TestCrossOriginBrowserRequestsRefused(t *testing.T) {
	ts := startServer(t, serverSetup{cfg: Config{AllowedOrigins: []string{"http://dashboard.localhost:3000"}}}, "pipeline")
	self := "http://" + ts.host
	cases := []struct {
		hdr  []string
		want int
	}{
		{[]string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{[]string{"Origin", "null"}, http.StatusForbidden},
		{[]string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{[]string{"Origin", self}, http.StatusOK},
		{[]string{"Origin", self, "Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{[]string{"Origin", "http://dashboard.localhost:3000"}, http.StatusOK},
		{nil, http.StatusOK},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/graphs/pipeline/runs", "/a2a"} {
			body := `{"input":"x","wait":true}`
			if path == "/a2a" {
				body = `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`
			}
			code, _, b := ts.do("POST", path, aliceToken, body, c.hdr...)
			if code != c.want {
				t.Errorf("%s %v: %d %s, want %d", path, c.hdr, code, b, c.want)
			}
		}
	}
}

func TestServerTimeoutsAreSet(t *testing.T) {
	c := (&Config{}).withDefaults()
	for name, d := range map[string]time.Duration{"read header": c.ReadHeaderTimeout.D(), "read": c.ReadTimeout.D(),
		"write": c.WriteTimeout.D(), "idle": c.IdleTimeout.D()} {
		if d <= 0 {
			t.Errorf("%s timeout is not set by default", name)
		}
	}
	// A client that never finishes its headers is cut off.
	ts := startServer(t, serverSetup{cfg: Config{ReadHeaderTimeout: graph.Duration(200 * time.Millisecond)}}, "pipeline")
	conn, err := net.Dial("tcp", ts.host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+ts.host+"\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, _ = io.ReadAll(conn)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a slow header kept the connection for %v", took)
	}
}

func TestLongResponsesOutliveTheWriteTimeout(t *testing.T) {
	// Runs and event streams may last longer than the write timeout: each
	// write extends it instead.
	ts := startServer(t, serverSetup{cfg: Config{WriteTimeout: graph.Duration(300 * time.Millisecond)}}, "slow")
	// A run that takes longer than the write timeout, waited for.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		time.Sleep(time.Second)
		// Cancel every run of alice's after a second: the waiting request gets its answer then.
		code, _, b := ts.do("GET", "/v1/runs", aliceToken, nil)
		if code == http.StatusOK {
			for _, id := range runIDs(b) {
				ts.do("POST", "/v1/runs/"+id+"/cancel", aliceToken, nil)
			}
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.base+"/v1/graphs/slow/runs", strings.NewReader(`{"input":"x","wait":true}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("a waited run longer than the write timeout: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if r := decodeRun(t, b); r.Status != "cancelled" {
		t.Errorf("status %q, want cancelled: %s", r.Status, b)
	}

	// An event stream quiet for longer than the write timeout still
	// delivers the end of the run.
	_, _, b = ts.do("POST", "/v1/graphs/slow/runs", aliceToken, `{"input":"x"}`)
	id := runIDs(b)[0]
	go func() {
		time.Sleep(time.Second)
		ts.do("POST", "/v1/runs/"+id+"/cancel", aliceToken, nil)
	}()
	code, _, b := ts.do("GET", "/v1/runs/"+id+"/events", aliceToken, nil)
	if code != http.StatusOK || !strings.Contains(string(b), "event: run.finished") {
		t.Errorf("a stream longer than the write timeout: %d %s", code, b)
	}
}

func runIDs(b []byte) []string {
	var ids []string
	for _, part := range strings.Split(string(b), `"run_id":"`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		ids = append(ids, id)
	}
	return ids
}

func TestTooManyRunsIsBusyNotQueued(t *testing.T) {
	ts := startServer(t, serverSetup{cfg: Config{MaxConcurrentRuns: 1}}, "slow", "pipeline")
	code, _, b := ts.do("POST", "/v1/graphs/slow/runs", aliceToken, `{"input":"x"}`)
	if code != http.StatusAccepted {
		t.Fatalf("%d %s", code, b)
	}
	start := time.Now()
	code, h, b := ts.do("POST", "/v1/graphs/pipeline/runs", bobToken, `{"input":"x","wait":true}`)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("second run: %d Retry-After=%q %s, want 503 with Retry-After", code, h.Get("Retry-After"), b)
	}
	if e := decodeError(t, b); e.Error.Code != "busy" {
		t.Errorf("code %q", e.Error.Code)
	}
	if time.Since(start) > time.Second {
		t.Errorf("the refusal waited %v: it should not queue", time.Since(start))
	}
}

func TestPrincipalRateLimited(t *testing.T) {
	ts := startServer(t, serverSetup{cfg: Config{RatePerPrincipal: 0.5, Burst: 2}}, "pipeline")
	for i := range 2 {
		if code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, `{"input":"x"}`); code != http.StatusAccepted {
			t.Fatalf("run %d: %d %s", i, code, b)
		}
	}
	code, h, b := ts.do("POST", "/v1/graphs/pipeline/runs", aliceToken, `{"input":"x"}`)
	if code != http.StatusTooManyRequests {
		t.Fatalf("third run: %d %s, want 429", code, b)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", h.Get("Retry-After"))
	}
	if e := decodeError(t, b); e.Error.Code != "rate_limited" {
		t.Errorf("code %q", e.Error.Code)
	}
	// Another principal has its own budget.
	if code, _, b := ts.do("POST", "/v1/graphs/pipeline/runs", bobToken, `{"input":"x"}`); code != http.StatusAccepted {
		t.Errorf("bob: %d %s", code, b)
	}
}

func TestSlowlorisBodyIsCut(t *testing.T) {
	ts := startServer(t, serverSetup{cfg: Config{ReadTimeout: graph.Duration(300 * time.Millisecond)}}, "pipeline")
	conn, err := net.Dial("tcp", ts.host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/graphs/pipeline/runs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{", ts.host, aliceToken)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, _ := io.ReadAll(conn)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a body that never comes held the connection %v", took)
	}
	if strings.Contains(string(resp), "200 OK") {
		t.Errorf("a truncated body was served: %q", firstLine(string(resp)))
	}
}
