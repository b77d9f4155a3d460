package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, c *Client, raw string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(req)
}

func TestRedirectToMetadataIsNeverFollowed(t *testing.T) {
	w := newWitness(t)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/meta":
			http.Redirect(rw, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/loop":
			http.Redirect(rw, r, "http://127.0.0.1:"+w.port()+"/", http.StatusFound)
		}
	}))
	defer srv.Close()

	for _, follow := range []int{0, 5} {
		c := mustNew(t, &Options{AllowPrivate: []string{AllowPrivateURL(srv.URL)}, FollowRedirects: follow})
		resp, err := get(t, c, srv.URL+"/meta")
		if resp != nil {
			resp.Body.Close()
		}
		pe := asPolicy(t, err, fmt.Sprintf("follow=%d", follow))
		want := "redirect not followed"
		if follow > 0 {
			want = "link-local address"
		}
		if pe.Reason != want || pe.Host != "169.254.169.254" {
			t.Errorf("follow=%d: got %v, want host 169.254.169.254 and reason %q", follow, pe, want)
		}
		resp, err = get(t, c, srv.URL+"/loop")
		if resp != nil {
			resp.Body.Close()
		}
		asPolicy(t, err, "redirect to an un-opted loopback port")
	}
	if n := w.settle(t); n != 0 {
		t.Fatalf("a redirect reached the loopback listener %d times", n)
	}
}

func TestRedirectsFollowedOnlyWithinTheLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(rw, r, "/b", http.StatusFound)
		case "/b":
			http.Redirect(rw, r, "/c", http.StatusFound)
		default:
			io.WriteString(rw, "done")
		}
	}))
	defer srv.Close()
	c := mustNew(t, &Options{AllowPrivate: []string{AllowPrivateURL(srv.URL)}, FollowRedirects: 1})
	resp, err := get(t, c, srv.URL+"/b")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "done" {
		t.Fatalf("body %q", body)
	}
	resp, err = get(t, c, srv.URL+"/a")
	if resp != nil {
		resp.Body.Close()
	}
	if pe := asPolicy(t, err, "two hops"); pe.Reason != "more than 1 redirects" {
		t.Errorf("reason %q", pe.Reason)
	}
}

func TestRedirectFromHTTPSToHTTPIsRefused(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, plain.URL, http.StatusFound)
	}))
	defer tlsSrv.Close()
	c := mustNew(t, &Options{
		AllowPrivate:    []string{AllowPrivateURL(plain.URL), AllowPrivateURL(tlsSrv.URL)},
		FollowRedirects: 3,
		TLSConfig:       tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig,
	})
	resp, err := get(t, c, tlsSrv.URL)
	if resp != nil {
		resp.Body.Close()
	}
	if pe := asPolicy(t, err, "downgrade"); pe.Reason != "redirect from https to http" {
		t.Errorf("reason %q", pe.Reason)
	}
}

func TestDNSRebindingIsCaughtAtConnectTime(t *testing.T) {
	w := newWitness(t)
	r := &rebindingResolver{}
	c := mustNew(t, &Options{Allowlist: []string{"rebind.test"}, Resolver: r})
	target := "http://rebind.test:" + w.port() + "/"

	// A check that resolves sees the public answer and passes...
	addrs, err := c.Resolve(context.Background(), target)
	if err != nil || len(addrs) != 1 || addrs[0].Addr().String() != "93.184.215.14" {
		t.Fatalf("Resolve = %v, %v; want the public answer", addrs, err)
	}
	// ...then the name rebinds to loopback, and the connect-time control
	// refuses the address the socket was about to connect to.
	resp, err := get(t, c, target)
	if resp != nil {
		resp.Body.Close()
	}
	pe := asPolicy(t, err, "rebound request")
	if pe.Addr != "127.0.0.1" || pe.Host != "rebind.test" || pe.Reason != "loopback address" {
		t.Errorf("got %#v", pe)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("refusal did not come from the dialer's control hook: %v", err)
	}
	if got := r.calls.Load(); got != 2 {
		t.Errorf("resolver called %d times, want 2", got)
	}

	conn, err := c.DialContext(context.Background(), "tcp", "rebind.test:"+w.port())
	if conn != nil {
		conn.Close()
	}
	asPolicy(t, err, "rebound DialContext")

	conn, err = c.Dialer().DialContext(context.Background(), "tcp", w.ln.Addr().String())
	if conn != nil {
		conn.Close()
	}
	asPolicy(t, err, "bare Dialer")

	if n := w.settle(t); n != 0 {
		t.Fatalf("%d connections reached loopback", n)
	}
}

func TestAllowPrivateOptsInOnlyThatAddress(t *testing.T) {
	other := newWitness(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(rw, "hello")
	}))
	defer srv.Close()
	c := mustNew(t, &Options{AllowPrivate: []string{AllowPrivateURL(srv.URL)}})

	resp, err := get(t, c, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" || hits.Load() != 1 {
		t.Fatalf("body %q, hits %d", body, hits.Load())
	}
	for _, raw := range []string{
		"http://127.0.0.1:" + other.port() + "/",
		"http://localhost:" + srv.Listener.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):] + "/",
		"http://[::ffff:127.0.0.2]:" + other.port() + "/",
	} {
		resp, err := get(t, c, raw)
		if resp != nil {
			resp.Body.Close()
		}
		asPolicy(t, err, raw)
	}
	if n := other.settle(t); n != 0 {
		t.Fatalf("%d connections reached a port that was not opted in", n)
	}
	if err := c.CheckAddr(srv.Listener.Addr().(*net.TCPAddr).AddrPort()); err != nil {
		t.Errorf("CheckAddr(opted-in) = %v", err)
	}
	asPolicy(t, c.CheckAddr(other.addrPort()), "CheckAddr(other)")
}

func TestAllowPrivateURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":     "127.0.0.1:8080",
		"http://127.0.0.1:8080/x?y": "127.0.0.1:8080",
		"https://127.0.0.1":         "127.0.0.1:443",
		"http://[::1]:9000":         "[::1]:9000",
		"http://[::1]":              "[::1]:80",
		"::bad":                     "",
		"http:///x":                 "",
		"http://127.0.0.1:0":        "",
	} {
		if got := AllowPrivateURL(in); got != want {
			t.Errorf("AllowPrivateURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProxyEnvironmentIsIgnored points every proxy variable at a listener
// and requests a non-loopback name (which net/http's environment proxy
// would send through the proxy); the request must go direct.
func TestProxyEnvironmentIsIgnored(t *testing.T) {
	proxy := newWitness(t)
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, "http://127.0.0.1:"+proxy.port())
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	var hosts record
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { hosts.add(r.Host) }))
	defer srv.Close()
	c := mustNew(t, &Options{
		Allowlist:    []string{"upstream.test"},
		AllowPrivate: []string{AllowPrivateURL(srv.URL)},
		Resolver:     &fixedResolver{addrs: []string{"127.0.0.1"}},
	})
	port := AllowPrivateURL(srv.URL)[len("127.0.0.1:"):]
	resp, err := get(t, c, "http://upstream.test:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := hosts.get(); len(got) != 1 || got[0] != "upstream.test:"+port {
		t.Errorf("server saw %v", got)
	}
	if n := proxy.settle(t); n != 0 {
		t.Fatalf("%d connections went to the environment's proxy", n)
	}
	if c.transport.Proxy != nil {
		t.Error("transport has a proxy function")
	}
}

func TestExplicitProxyIsUsedAndRequestsStillChecked(t *testing.T) {
	var seen record
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.String())
		io.WriteString(rw, "via proxy")
	}))
	defer proxy.Close()
	c := mustNew(t, &Options{Allowlist: []string{"upstream.test"}, Proxy: mustURL(t, proxy.URL)})
	resp, err := get(t, c, "http://upstream.test/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := seen.get(); string(body) != "via proxy" || len(got) != 1 || got[0] != "http://upstream.test/x" {
		t.Fatalf("body %q, proxy saw %v", body, got)
	}
	for _, raw := range []string{"http://127.0.0.1/", "http://other.test/", "http://localhost/"} {
		resp, err := get(t, c, raw)
		if resp != nil {
			resp.Body.Close()
		}
		asPolicy(t, err, raw)
	}
	if got := seen.get(); len(got) != 1 {
		t.Fatalf("refused requests reached the proxy: %v", got)
	}
}

func TestResponseBodyIsCappedWhileStreaming(t *testing.T) {
	const total = 17 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := rw.Write(chunk); err != nil {
				return
			}
			rw.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	c := mustNew(t, &Options{AllowPrivate: []string{AllowPrivateURL(srv.URL)}})
	resp, err := get(t, c, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != DefaultMaxResponseBytes {
		t.Fatalf("io.Copy error %v, want *LimitError at %d", err, DefaultMaxResponseBytes)
	}
	if n != DefaultMaxResponseBytes {
		t.Errorf("read %d bytes, want exactly the cap %d", n, DefaultMaxResponseBytes)
	}
	if _, recvd := c.Bytes(); recvd > DefaultMaxResponseBytes+256<<10 {
		t.Errorf("%d bytes came off the wire for a %d-byte cap", recvd, DefaultMaxResponseBytes)
	}
}

func TestResponseBodyCapEdges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/over" { // streamed, no declared length
			rw.Write([]byte(strings.Repeat("x", 600)))
			rw.(http.Flusher).Flush()
			rw.Write([]byte(strings.Repeat("x", 401)))
			return
		}
		n := map[string]int{"/exact": 1000, "/declared": 5000}[r.URL.Path]
		rw.Header().Set("Content-Length", fmt.Sprint(n))
		rw.Write([]byte(strings.Repeat("x", n)))
	}))
	defer srv.Close()
	c := mustNew(t, &Options{AllowPrivate: []string{AllowPrivateURL(srv.URL)}, MaxResponseBytes: 1000})
	for path, want := range map[string]int64{"/exact": 1000, "/over": 1000, "/declared": 0} {
		resp, err := get(t, c, srv.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		var le *LimitError
		if path == "/exact" && err != nil || path != "/exact" && !errors.As(err, &le) {
			t.Errorf("%s: err %v", path, err)
		}
		if n != want {
			t.Errorf("%s: read %d bytes, want %d", path, n, want)
		}
	}
}

func TestTimeoutsHaveNonZeroDefaultsAndAreOverridable(t *testing.T) {
	c := mustNew(t, nil)
	hc := c.HTTPClient()
	checks := map[string][2]time.Duration{
		"total":           {hc.Timeout, DefaultTimeout},
		"connect":         {c.Dialer().Timeout, DefaultConnectTimeout},
		"tls handshake":   {c.transport.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout},
		"response header": {c.transport.ResponseHeaderTimeout, DefaultResponseHeaderTimeout},
	}
	for name, got := range checks {
		if got[0] == 0 || got[0] != got[1] {
			t.Errorf("%s timeout %v, want %v", name, got[0], got[1])
		}
	}
	if c.maxBody != DefaultMaxResponseBytes || c.follow != 0 {
		t.Errorf("defaults: cap %d follow %d", c.maxBody, c.follow)
	}
	o := mustNew(t, &Options{Timeout: time.Second, ConnectTimeout: 2 * time.Second, TLSHandshakeTimeout: 3 * time.Second, ResponseHeaderTimeout: 4 * time.Second})
	if o.HTTPClient().Timeout != time.Second || o.Dialer().Timeout != 2*time.Second ||
		o.transport.TLSHandshakeTimeout != 3*time.Second || o.transport.ResponseHeaderTimeout != 4*time.Second {
		t.Error("overrides not applied")
	}
	if c.HTTPClient() == hc {
		t.Error("HTTPClient returned a shared *http.Client")
	}
}

func TestSlowServersHitTheTimeouts(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			rw.WriteHeader(http.StatusOK)
			rw.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	for path, o := range map[string]*Options{
		"/header": {ResponseHeaderTimeout: 100 * time.Millisecond},
		"/body":   {Timeout: 200 * time.Millisecond},
	} {
		o.AllowPrivate = []string{AllowPrivateURL(srv.URL)}
		c := mustNew(t, o)
		start := time.Now()
		resp, err := get(t, c, srv.URL+path)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Errorf("%s: no timeout", path)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", path, d)
		}
	}
}

func TestBytesAreCountedBothWays(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Write(make([]byte, 20000))
	}))
	defer srv.Close()
	var cb atomic.Int64
	c := mustNew(t, &Options{AllowPrivate: []string{AllowPrivateURL(srv.URL)}, OnBytes: func(n int64) { cb.Add(n) }})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("y", 10000)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sent, recvd := c.Bytes()
	if sent < 10000 || recvd < 20000 || cb.Load() != sent+recvd {
		t.Errorf("sent %d received %d callback %d", sent, recvd, cb.Load())
	}
}

func TestDialContextRefusesOtherNetworks(t *testing.T) {
	c := mustNew(t, &Options{AnyPublicHost: true})
	for _, network := range []string{"udp", "unix", "ip4:icmp"} {
		_, err := c.DialContext(context.Background(), network, "8.8.8.8:53")
		asPolicy(t, err, network)
	}
}
