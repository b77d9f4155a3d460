package egress

import (
	"net/netip"
	"strings"
)

// host is a URL or dial host after normalization.
type host struct {
	// name is the lowercased host without its trailing dot; for an IP
	// literal it is the canonical form of addr.
	name string
	// addr is set when the host is an IP literal in any spelling.
	addr netip.Addr
	// odd is true when an IPv4 literal was not written in dotted-quad
	// decimal (decimal integer, octal, hex, short forms).
	odd bool
}

// parseHost normalizes h and recognizes IP literals in every spelling that
// some resolver on some platform accepts. On refusal it returns a reason.
func parseHost(h string) (host, string) {
	if h == "" {
		return host{}, "missing host"
	}
	if strings.IndexByte(h, ':') >= 0 {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return host{}, "malformed ipv6 address"
		}
		return host{name: a.String(), addr: a}, ""
	}
	name, reason := normalizeName(h)
	if reason != "" {
		return host{}, reason
	}
	if !endsInNumber(name) {
		return host{name: name}, ""
	}
	// A host whose last label is numeric is an IPv4 literal to browsers
	// and to inet_aton; refuse what does not parse rather than let some
	// resolver guess.
	a, ok := parseIPv4(name)
	if !ok {
		return host{}, "malformed ipv4 address"
	}
	canon := a.String()
	return host{name: canon, addr: a, odd: canon != name}, ""
}

// normalizeName lowercases an ASCII host name and drops one trailing dot.
// Anything outside letters, digits, '-', '_' and '.', and empty labels, are
// refused.
func normalizeName(h string) (string, string) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", "missing host"
	}
	if len(h) > 253 {
		return "", "host name too long"
	}
	lower := true
	prevDot := true
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 0x80:
			return "", "non-ascii host name (use its punycode form)"
		case c == '.':
			if prevDot {
				return "", "malformed host name (empty label)"
			}
			prevDot = true
			continue
		case c >= 'A' && c <= 'Z':
			lower = false
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return "", "invalid character in host name"
		}
		prevDot = false
	}
	if prevDot {
		return "", "malformed host name (empty label)"
	}
	if !lower {
		h = strings.ToLower(h)
	}
	return h, ""
}

// endsInNumber reports whether the last label of name is all decimal digits
// or a 0x-prefixed hex number: the WHATWG URL rule for "this is an IPv4
// address".
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		for i := 2; i < len(last); i++ {
			if !isHex(last[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseIPv4 parses s with inet_aton semantics: one to four parts separated
// by dots, each decimal, octal (leading 0) or hex (0x); the last part fills
// the remaining bytes ("127.1" is 127.0.0.1, "2130706433" is 127.0.0.1).
func parseIPv4(s string) (netip.Addr, bool) {
	var parts [4]uint32
	n := 0
	for {
		if n == 4 {
			return netip.Addr{}, false
		}
		i := strings.IndexByte(s, '.')
		p := s
		if i >= 0 {
			p = s[:i]
		}
		v, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if i < 0 {
			break
		}
		s = s[i+1:]
	}
	for i := 0; i < n-1; i++ {
		if parts[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	last := parts[n-1]
	if n > 1 && last>>(8*(5-n)) != 0 {
		return netip.Addr{}, false
	}
	u := last
	for i := 0; i < n-1; i++ {
		u |= parts[i] << (24 - 8*i)
	}
	return v4of(u), true
}

// parseIPv4Part parses one inet_aton part; "0x" alone is 0, as in glibc.
func parseIPv4Part(p string) (uint32, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		c := p[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return uint32(v), true
}

// isLocalhostName reports names that resolve to loopback by convention or
// by RFC 6761, whatever DNS says.
func isLocalhostName(name string) bool {
	switch name {
	case "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback":
		return true
	}
	return strings.HasSuffix(name, ".localhost")
}
