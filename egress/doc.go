// Package egress is the one outbound HTTP client every Babelagent adapter
// uses (http, openapi, mcp, a2a, llm) and the one dialer that anything else
// making outbound connections reuses (a sandbox's CONNECT proxy, custom
// transports).
//
// It enforces kernel invariant 4: a connection goes only to a host the
// client's allowlist names, and never to a loopback, private, link-local,
// shared (CGNAT), reserved, documentation, multicast, broadcast or
// unspecified address, however the address is spelled (odd IPv4 forms,
// IPv4-mapped, -compatible and -translated IPv6, NAT64, 6to4, Teredo). The
// decision is taken twice: on the URL before anything is resolved or dialed
// (Check), and on the address actually dialed, inside the socket's
// connect-time control hook, so a DNS answer that changes between the two
// (rebinding) is still caught. Redirects are not followed unless asked for,
// and then each hop is decided again. Response bodies are size-capped while
// they stream.
//
// This package must never: dial before deciding, follow a redirect it has
// not checked, honour proxy environment variables implicitly, keep a
// package-level client or any other mutable package state, or put URL
// userinfo (or query strings) into an error. A refusal is always a
// *PolicyError; an over-long body is always a *LimitError.
//
// Tests in other packages reach an httptest server by opting its exact
// address in:
//
//	c, err := egress.New(&egress.Options{AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}})
package egress
