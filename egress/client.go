package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Client is a guarded outbound client. It is safe for concurrent use; build
// one per policy (per node or adapter), never share one across policies.
type Client struct {
	allow        allowlist
	anyPublic    bool
	optIn        map[netip.AddrPort]struct{}
	follow       int
	maxBody      int64
	connectTO    time.Duration
	resolver     Resolver
	proxyAddr    string
	onBytes      func(int64)
	sent, recvd  atomic.Int64
	transport    *http.Transport
	roundTripper *guardedTransport
	timeout      time.Duration
}

// New builds a Client from opts; nil opts are the defaults (nothing
// allowed). It refuses malformed allowlist and AllowPrivate entries,
// negative limits and unsupported proxies.
func New(opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	c := &Client{
		anyPublic: o.AnyPublicHost,
		follow:    o.FollowRedirects,
		maxBody:   orDefault(o.MaxResponseBytes, DefaultMaxResponseBytes),
		connectTO: orDefault(o.ConnectTimeout, DefaultConnectTimeout),
		timeout:   orDefault(o.Timeout, DefaultTimeout),
		resolver:  o.Resolver,
		onBytes:   o.OnBytes,
	}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	switch {
	case o.FollowRedirects < 0:
		return nil, errors.New("egress: negative FollowRedirects")
	case o.MaxResponseBytes < 0:
		return nil, errors.New("egress: negative MaxResponseBytes")
	case o.ConnectTimeout < 0, o.TLSHandshakeTimeout < 0, o.ResponseHeaderTimeout < 0, o.Timeout < 0:
		return nil, errors.New("egress: negative timeout")
	}
	var err error
	if c.allow, err = newAllowlist(o.Allowlist); err != nil {
		return nil, err
	}
	if c.optIn, err = parseOptIns(o.AllowPrivate); err != nil {
		return nil, err
	}
	var proxy func(*http.Request) (*url.URL, error)
	if o.Proxy != nil {
		if c.proxyAddr, err = proxyAddr(o.Proxy); err != nil {
			return nil, err
		}
		proxy = http.ProxyURL(o.Proxy)
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSConfig != nil {
		tlsConf = o.TLSConfig.Clone()
	}
	c.transport = &http.Transport{
		Proxy:                  proxy, // never the environment
		DialContext:            c.DialContext,
		TLSClientConfig:        tlsConf,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    orDefault(o.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout),
		ResponseHeaderTimeout:  orDefault(o.ResponseHeaderTimeout, DefaultResponseHeaderTimeout),
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           100,
		MaxResponseHeaderBytes: 1 << 20,
	}
	c.roundTripper = &guardedTransport{c: c, next: c.transport}
	return c, nil
}

func orDefault[T int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func parseOptIns(entries []string) (map[netip.AddrPort]struct{}, error) {
	m := make(map[netip.AddrPort]struct{}, len(entries))
	for _, e := range entries {
		ap, err := netip.ParseAddrPort(e)
		if err != nil {
			return nil, fmt.Errorf("egress: AllowPrivate entry %q is not ip:port: %w", e, err)
		}
		if ap.Port() == 0 {
			return nil, fmt.Errorf("egress: AllowPrivate entry %q has port 0", e)
		}
		ap = canonicalAddrPort(ap)
		switch v := classify(ap.Addr()); v.cat {
		case catLoopback, catPrivate, catShared, catUniqueLocal:
		default:
			return nil, fmt.Errorf("egress: AllowPrivate entry %q: cannot opt in a %s", e, v.cat)
		}
		m[ap] = struct{}{}
	}
	return m, nil
}

func canonicalAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port())
}

func proxyAddr(u *url.URL) (string, error) {
	port := u.Port()
	switch u.Scheme {
	case "http":
		port = cmpOr(port, "80")
	case "https":
		port = cmpOr(port, "443")
	case "socks5", "socks5h":
		port = cmpOr(port, "1080")
	default:
		return "", fmt.Errorf("egress: proxy scheme %q not supported", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", errors.New("egress: proxy URL has no host")
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// AllowPrivateURL returns the "ip:port" of rawURL (an httptest server's
// URL) for Options.AllowPrivate, with the scheme's default port when the
// URL names none. It returns "" for a URL it cannot read, which New refuses.
func AllowPrivateURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port, reason := portOf(u.Scheme, u.Port())
	if reason != "" {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), strconv.Itoa(int(port)))
}

// HTTPClient returns a new *http.Client whose transport is this client's
// guarded one: every request is checked before it is sent, every dial is
// checked at connect time, redirects follow the client's policy and bodies
// are capped. Callers may change the returned value freely.
func (c *Client) HTTPClient() *http.Client {
	return &http.Client{
		Transport:     c.roundTripper,
		CheckRedirect: c.checkRedirect,
		Timeout:       c.timeout,
	}
}

// Do sends req with HTTPClient, and strips userinfo and query from the URL
// in a returned *url.Error.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			if u, perr := url.Parse(ue.URL); perr == nil {
				ue.URL = redactURL(u)
			} else {
				ue.URL = ""
			}
		}
	}
	return resp, err
}

// Bytes returns the bytes written to and read from connections this client
// dialed so far.
func (c *Client) Bytes() (sent, received int64) {
	return c.sent.Load(), c.recvd.Load()
}

// CloseIdleConnections closes the transport's idle connections.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// Resolve checks rawURL, resolves its host with the client's resolver and
// refuses if any answer is blocked. It is an early, explanatory check (for
// validate and inspect); it does not protect a later request, which decides
// again on the address it dials.
func (c *Client) Resolve(ctx context.Context, rawURL string) ([]netip.AddrPort, error) {
	if err := c.Check(rawURL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(rawURL) // Check parsed it
	port, _ := portOf(u.Scheme, u.Port())
	h, _ := parseHost(u.Hostname())
	addrs, err := c.lookup(ctx, h, "tcp")
	if err != nil {
		return nil, err
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, port)
		if err := c.checkDialed(h.name, ap); err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, nil
}
