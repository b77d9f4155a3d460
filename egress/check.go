package egress

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Check is the decision taken on a URL before anything is resolved or
// dialed: scheme, host syntax, literal addresses in any spelling, localhost
// names, opt-ins and the allowlist. A nil error does not mean a request
// will connect: the address dialed is decided again.
func (c *Client) Check(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		reason := "malformed url"
		var ue *url.Error
		if errors.As(err, &ue) { // ue.URL may hold userinfo: never use it
			reason += ": " + unquote(ue.Err.Error())
		}
		return &PolicyError{Reason: reason}
	}
	return c.checkURL(u)
}

// unquote drops the quoted part of a url parse error ("invalid port
// \":secret\" after host"), which is a piece of the URL and may be a
// credential typed in the wrong place.
func unquote(msg string) string {
	i, j := strings.IndexByte(msg, '"'), strings.LastIndexByte(msg, '"')
	if i < 0 || j <= i {
		return msg
	}
	return msg[:i] + "…" + msg[j+1:]
}

// CheckAddr is the decision taken on an address about to be dialed: the
// address rules and the AllowPrivate opt-ins.
func (c *Client) CheckAddr(ap netip.AddrPort) error {
	return c.checkDialed("", ap)
}

func (c *Client) checkURL(u *url.URL) error {
	switch u.Scheme {
	case "http", "https":
	case "":
		return &PolicyError{URL: redactURL(u), Reason: "missing scheme"}
	default:
		return &PolicyError{URL: redactURL(u), Reason: "scheme " + strconv.Quote(u.Scheme) + " not allowed"}
	}
	if u.Opaque != "" {
		return &PolicyError{URL: redactURL(u), Reason: "opaque url"}
	}
	port, reason := portOf(u.Scheme, u.Port())
	if reason != "" {
		return &PolicyError{URL: redactURL(u), Host: strings.ToLower(u.Hostname()), Reason: reason}
	}
	_, err := c.checkHost(u.Hostname(), port)
	if err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			pe.URL = redactURL(u)
		}
	}
	return err
}

// checkHost decides a host and port before any resolution.
func (c *Client) checkHost(raw string, port uint16) (host, error) {
	h, reason := parseHost(raw)
	if reason != "" {
		return h, &PolicyError{Host: strings.ToLower(raw), Reason: reason}
	}
	if h.addr.IsValid() {
		ap := netip.AddrPortFrom(h.addr, port)
		if c.optedIn(ap) {
			return h, nil
		}
		if v := classify(h.addr); v.blocked() {
			return h, &PolicyError{Host: strings.ToLower(raw), Addr: h.name, Reason: v.reason()}
		}
		if h.odd {
			return h, &PolicyError{Host: strings.ToLower(raw), Addr: h.name, Reason: "non-canonical ipv4 form"}
		}
	} else if isLocalhostName(h.name) {
		return h, &PolicyError{Host: h.name, Reason: "localhost name"}
	}
	if !c.anyPublic && !c.allow.match(h) {
		return h, &PolicyError{Host: h.name, Reason: "host not in allowlist"}
	}
	return h, nil
}

func (c *Client) optedIn(ap netip.AddrPort) bool {
	if len(c.optIn) == 0 {
		return false
	}
	_, ok := c.optIn[canonicalAddrPort(ap)]
	return ok
}

// checkDialed decides the address a socket is about to connect to.
func (c *Client) checkDialed(hostName string, ap netip.AddrPort) error {
	if c.optedIn(ap) {
		return nil
	}
	if v := classify(ap.Addr()); v.blocked() {
		return &PolicyError{Host: hostName, Addr: ap.Addr().String(), Reason: v.reason()}
	}
	return nil
}

// portOf returns the port a URL connects to.
func portOf(scheme, port string) (uint16, string) {
	if port == "" {
		if scheme == "https" {
			return 443, ""
		}
		return 80, ""
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return 0, "invalid port"
	}
	return uint16(p), ""
}
