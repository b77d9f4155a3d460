package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultConnectTimeout        = 5 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
	DefaultTimeout               = 60 * time.Second
	DefaultMaxResponseBytes      = 16 << 20
)

// Resolver turns a host name into addresses. *net.Resolver satisfies it.
// Its answer is never trusted: every address is decided again when it is
// dialed. It must be safe for concurrent use.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Options configure a Client. A nil *Options is the zero Options: nothing
// is allowed (fail closed), with default caps and timeouts.
type Options struct {
	// Allowlist names the hosts a request may go to: an exact host name
	// ("api.example.com"), an IP address, or "*.example.com", which matches
	// every subdomain at any depth but not example.com itself. Matching is
	// case-insensitive and ignores one trailing dot. Empty means no host is
	// allowed unless AnyPublicHost is set. The allowlist never lets a
	// request reach a blocked address; AllowPrivate does that.
	Allowlist []string

	// AnyPublicHost allows any host whose addresses are public, instead of
	// an allowlist. Address rules still apply in full.
	AnyPublicHost bool

	// AllowPrivate opts exact "ip:port" targets in despite the address
	// rules, for local development and tests ("127.0.0.1:8080",
	// "[::1]:8080"). Only loopback, private, shared (CGNAT) and unique local
	// addresses may be opted in. The match is on the address dialed; an
	// entry also admits its IP literal past the allowlist. AllowPrivateURL
	// builds an entry from an httptest server's URL.
	AllowPrivate []string

	// FollowRedirects is how many redirects a request may follow; 0, the
	// default, follows none and the redirect is a *PolicyError ("redirect
	// not followed"). Each hop is checked like the first request, and a
	// redirect from https to http is refused.
	FollowRedirects int

	// MaxResponseBytes caps each response body; 0 means
	// DefaultMaxResponseBytes. Reading past it yields a *LimitError.
	MaxResponseBytes int64

	// Timeouts; 0 means the default. ConnectTimeout bounds name resolution
	// and connecting together; Timeout bounds a whole request, redirects
	// and body read included.
	ConnectTimeout        time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	Timeout               time.Duration

	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver

	// Proxy, when set, sends every HTTP request through this proxy (http,
	// https or socks5). Proxy environment variables are never consulted.
	// The proxy's own address is exempt from the address rules, and
	// requests are still checked against scheme, literal addresses and the
	// allowlist before they are sent; but the proxy, not this client,
	// resolves and dials the target, so it must enforce its own address
	// policy.
	Proxy *url.URL

	// TLSConfig is cloned into the transport; nil means a TLS 1.2 minimum
	// with the system roots (use an httptest TLS server's Client's roots in
	// tests).
	TLSConfig *tls.Config

	// OnBytes, if set, is called with the count of each read from and write
	// to a connection this client dialed (request and response bytes on
	// the wire, before TLS decryption). It is called concurrently from
	// connection goroutines and must be fast.
	OnBytes func(n int64)
}
