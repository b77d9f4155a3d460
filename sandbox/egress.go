package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// How an os sandbox with Spec.Egress reaches the network.
//
// The sandbox keeps its own network namespace: it has a loopback interface
// and no route out. Before the program starts, the prologue starts a relay
// (a few lines of the system python3) that listens on ProxyAddr inside that
// namespace and, for each connection it accepts, passes the connected
// socket's descriptor — not its bytes — over a socketpair (fd 4) to the
// server, then closes its own copy. The server side of the socketpair is a
// per-call proxy that speaks HTTP on each socket it receives: CONNECT
// host:port, and plain-HTTP requests in absolute form. Every target is
// decided by an egress.Client built from the call's Spec.Egress: the host
// is checked against the allowlist, and the address actually dialed is
// checked by the client's dialer (egress invariant 4); a refusal is a 403
// and the connection is closed. The program sees HTTP_PROXY, HTTPS_PROXY
// (and their lowercase forms) pointing at the relay.
//
// Nothing in the sandbox can name a file or address outside it: the relay
// holds a socketpair descriptor, not a path, and the proxy goes away, its
// connections closed, when the call ends.

// ProxyAddr is the address of the egress relay inside an os sandbox whose
// Spec.Egress is set; HTTP_PROXY and HTTPS_PROXY point at it.
const ProxyAddr = "127.0.0.1:3128"

// proxyCtlFD is the descriptor of the relay's end of the socketpair inside
// the sandbox. It must be a single digit: dash redirects no higher.
const proxyCtlFD = 4

// maxProxyConns bounds the connections one call's proxy serves at once.
const maxProxyConns = 64

// proxyHeaderBytes bounds a request's line and headers.
const proxyHeaderBytes = 64 << 10

// proxyIdle is how long the proxy waits for a request on a connection.
const proxyIdle = 30 * time.Second

// relayScript is the relay the prologue starts: it listens on ProxyAddr,
// returns (the parent exits) once listening, and hands every accepted
// socket to the server. It copies no byte itself.
const relayScript = `import os, socket, sys
ctl = socket.socket(fileno=int(sys.argv[1]))
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[2], int(sys.argv[3])))
ls.listen(128)
if os.fork():
    os._exit(0)
while True:
    c, _ = ls.accept()
    try:
        socket.send_fds(ctl, [b"c"], [c.fileno()])
    except OSError:
        os._exit(0)
    c.close()
`

// EgressStats counts what a call's egress proxy did.
type EgressStats struct {
	// Sent and Received count the bytes written to and read from the
	// connections the proxy dialed.
	Sent, Received int64
	// Refused counts the requests the proxy refused.
	Refused int64
}

// proxy is one call's egress proxy. It serves the sockets the in-sandbox
// relay passes over ctl until close.
type proxy struct {
	client  *egress.Client
	tr      *http.Transport
	maxBody int64
	ctl     *net.UnixConn
	ctx     context.Context
	cancel  context.CancelFunc
	refused atomic.Int64
	budget  atomic.Pointer[error] // the run's egress budget ran out

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startProxy builds the proxy of a call under opts and starts serving. It
// returns the proxy and the sandbox's end of the socketpair, which the
// caller hands to bubblewrap and then closes.
func startProxy(ctx context.Context, opts *egress.Options) (*proxy, *os.File, error) {
	o := *opts
	// The sandbox always decides with an allowlist, and dials itself.
	o.AnyPublicHost, o.Proxy = false, nil
	// Every byte on the wire is charged to the run's egress budget, as an
	// http node's are; past it, the proxy cuts every connection.
	var p *proxy
	prev := o.OnBytes
	o.OnBytes = func(n int64) {
		if prev != nil {
			prev(n)
		}
		if err := agent.ChargeEgress(ctx, n); err != nil {
			p.overBudget(err)
		}
	}
	client, err := egress.New(&o)
	if err != nil {
		return nil, nil, &SpecError{Field: "Egress", Reason: err.Error()}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &SetupError{Kind: KindOS, Reason: "egress socketpair: " + err.Error(), Err: err}
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "babel-egress")
	sandboxEnd := os.NewFile(uintptr(fds[1]), "babel-egress-sandbox")
	c, err := net.FileConn(hostEnd)
	_ = hostEnd.Close()
	if err != nil {
		_ = sandboxEnd.Close()
		return nil, nil, &SetupError{Kind: KindOS, Reason: "egress socketpair: " + err.Error(), Err: err}
	}
	maxBody := o.MaxResponseBytes
	if maxBody <= 0 {
		maxBody = egress.DefaultMaxResponseBytes
	}
	pctx, cancel := context.WithCancel(ctx)
	p = &proxy{
		client:  client,
		maxBody: maxBody,
		ctl:     c.(*net.UnixConn),
		ctx:     pctx,
		cancel:  cancel,
		conns:   map[net.Conn]struct{}{},
		tr: &http.Transport{
			Proxy:                  nil, // never the environment
			DialContext:            client.DialContext,
			DisableKeepAlives:      true,
			DisableCompression:     true,
			ResponseHeaderTimeout:  egress.DefaultResponseHeaderTimeout,
			MaxResponseHeaderBytes: 1 << 20,
		},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, sandboxEnd, nil
}

// overBudget records that the run's egress budget ran out, and cuts every
// connection.
func (p *proxy) overBudget(err error) {
	if !p.budget.CompareAndSwap(nil, &err) {
		return
	}
	p.cancel()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// budgetErr is the error the run's egress budget gave, if it ran out.
func (p *proxy) budgetErr() error {
	if e := p.budget.Load(); e != nil {
		return *e
	}
	return nil
}

// close stops the proxy: every connection it holds is closed, and it
// returns once every goroutine of the proxy is gone.
func (p *proxy) close() EgressStats {
	p.cancel()
	_ = p.ctl.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	sent, recvd := p.client.Bytes()
	return EgressStats{Sent: sent, Received: recvd, Refused: p.refused.Load()}
}

// track registers c to be closed by close; false means the proxy is
// closing or full, and c was closed.
func (p *proxy) track(c net.Conn, limit bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || limit && len(p.conns) >= maxProxyConns {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// acceptLoop receives the sockets the relay passes, one per message, until
// the relay's end is closed (the sandbox is gone) or the proxy closes.
func (p *proxy) acceptLoop() {
	defer p.wg.Done()
	buf := make([]byte, 8)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := p.ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 && oobn == 0 {
			return
		}
		c := socketConn(oob[:oobn])
		if c == nil || !p.track(c, true) {
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// socketConn turns the descriptors of one message into a connection: the
// message must carry exactly one stream socket; anything else is closed.
func socketConn(oob []byte) net.Conn {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil
	}
	fd := fds[0]
	unix.CloseOnExec(fd)
	if t, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || t != unix.SOCK_STREAM {
		_ = unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "babel-egress-conn")
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		return nil
	}
	return c
}

// serve reads one request from c and answers it: a CONNECT becomes a
// tunnel, a plain-HTTP request is forwarded; c is closed afterwards.
func (p *proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	lr := &io.LimitedReader{R: c, N: proxyHeaderBytes}
	br := bufio.NewReader(lr)
	_ = c.SetReadDeadline(time.Now().Add(proxyIdle))
	req, err := http.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			p.deny(c, http.StatusBadRequest, "malformed request")
		}
		return
	}
	lr.N = 1<<63 - 1 // the body is framed by the request itself
	_ = c.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		p.tunnel(c, br, req)
		return
	}
	p.forward(c, req)
}

// deny answers status with a short reason and counts a refusal.
func (p *proxy) deny(c net.Conn, status int, reason string) {
	if status == http.StatusForbidden {
		p.refused.Add(1)
	}
	body := "babel egress proxy: " + reason + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// denyErr answers a failed dial or round trip: 403 for a refusal by policy,
// 502 otherwise.
func (p *proxy) denyErr(c net.Conn, err error) {
	var pe *egress.PolicyError
	if errors.As(err, &pe) {
		p.deny(c, http.StatusForbidden, pe.Error())
		return
	}
	p.deny(c, http.StatusBadGateway, "cannot reach the target")
}

// tunnel serves a CONNECT: it dials the target through the egress client,
// which decides the host and the address dialed, and relays bytes both
// ways until either side is done.
func (p *proxy) tunnel(c net.Conn, br *bufio.Reader, req *http.Request) {
	target := req.RequestURI
	if _, port, err := net.SplitHostPort(target); err != nil || port == "" {
		p.deny(c, http.StatusBadRequest, "CONNECT wants host:port")
		return
	}
	up, err := p.client.DialContext(p.ctx, "tcp", target)
	if err != nil {
		p.denyErr(c, err)
		return
	}
	if !p.track(up, false) {
		return
	}
	defer p.untrack(up)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if n := br.Buffered(); n > 0 { // bytes the client sent ahead of our answer
		early, _ := br.Peek(n)
		if _, err := up.Write(early); err != nil {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, c)
		closeWrite(up)
	}()
	if _, err := io.Copy(c, &cappedReader{r: up, left: p.maxBody}); err != nil {
		// Over the cap, or a side failed: end the tunnel both ways now
		// rather than wait for the client to hang up.
		_ = c.Close()
		_ = up.Close()
	}
	closeWrite(c)
	<-done
}

// forward sends a plain-HTTP request in absolute form to its target and
// writes the response back; the connection is closed afterwards.
func (p *proxy) forward(c net.Conn, req *http.Request) {
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		p.deny(c, http.StatusBadRequest, "want CONNECT, or a request for an absolute http:// URL")
		return
	}
	if err := p.client.Check(req.URL.String()); err != nil {
		p.denyErr(c, err)
		return
	}
	out := req.Clone(p.ctx)
	out.RequestURI = ""
	out.Close = true
	dropHopHeaders(out.Header)
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		p.denyErr(c, err)
		return
	}
	defer resp.Body.Close()
	dropHopHeaders(resp.Header)
	resp.Close = true
	resp.Body = &cappedReader{r: resp.Body, left: p.maxBody}
	_ = resp.Write(c)
}

// hopHeaders are the headers that belong to one connection, not to the
// request or response relayed.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Upgrade",
}

func dropHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// errBodyCap ends a relayed body that grew past the cap.
var errBodyCap = errors.New("sandbox: egress response exceeds the size cap")

// cappedReader fails once more than left bytes are read.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errBodyCap
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

func (c *cappedReader) Close() error {
	if rc, ok := c.r.(io.Closer); ok {
		return rc.Close()
	}
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// proxyEnv is what the program's environment says about the proxy.
func proxyEnv() map[string]string {
	u := "http://" + ProxyAddr
	return map[string]string{"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u}
}

// relayCommand is the prologue line that starts the relay, and fails the
// sandbox's start if it cannot listen.
func relayCommand() string {
	host, port, _ := net.SplitHostPort(ProxyAddr)
	return fmt.Sprintf("%s -I -S -c '%s' %d %s %s </dev/null >/dev/null 2>&1 3>&- || { echo 'babel-sandbox: cannot start the egress relay' >&2; exit 121; }\nexec %d>&-\n",
		PythonPath, relayScript, proxyCtlFD, host, port, proxyCtlFD)
}
