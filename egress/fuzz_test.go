package egress

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzClassify: no input panics; an IPv6 address that embeds a blocked
// IPv4 address, in any of the embedding forms, is blocked; an IPv4-mapped
// address is decided exactly as its IPv4 address.
func FuzzClassify(f *testing.F) {
	for _, name := range []string{"ssrf-blocked.txt", "ssrf-allowed.txt"} {
		for _, raw := range readVectors(f, name) {
			u, err := url.Parse(raw)
			if err != nil {
				continue
			}
			if h, reason := parseHost(u.Hostname()); reason == "" && h.addr.IsValid() {
				b := h.addr.AsSlice()
				for form := range uint8(9) {
					f.Add(b, form, uint64(0x0123456789abcdef))
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, form uint8, extra uint64) {
		if len(b) >= 16 {
			a := netip.AddrFrom16([16]byte(b[:16]))
			blocked, reason := Classify(a)
			if blocked == (reason == "") {
				t.Fatalf("Classify(%s) = %v, %q", a, blocked, reason)
			}
		}
		var v4 [4]byte
		copy(v4[:], b)
		in := netip.AddrFrom4(v4)
		inBlocked, _ := Classify(in)
		u := binary.BigEndian.Uint32(v4[:])
		var a [16]byte
		hi, lo := uint64(0), uint64(0)
		switch form % 9 {
		case 0: // mapped
			lo = 0xffff<<32 | uint64(u)
		case 1: // compatible
			lo = uint64(u)
		case 2: // translated
			lo = 0xffff0000<<32 | uint64(u)
		case 3: // NAT64 well-known prefix
			hi, lo = 0x0064_ff9b_0000_0000, uint64(u)
		case 4: // NAT64 local-use prefix
			hi, lo = 0x0064_ff9b_0001_0000|extra&0xffff, uint64(u)
		case 5: // 6to4, any subnet and interface id
			hi, lo = 0x2002<<48|uint64(u)<<16|extra&0xffff, extra
		case 6: // Teredo server
			hi, lo = 0x2001_0000<<32|uint64(u), extra
		case 7: // Teredo client, obfuscated
			hi, lo = 0x2001_0000<<32|extra>>32, extra&0xffff_ffff_0000_0000|uint64(^u)
		case 8: // plain IPv4
			if b2, _ := Classify(in); b2 != inBlocked {
				t.Fatal("Classify is not deterministic")
			}
			return
		}
		binary.BigEndian.PutUint64(a[:8], hi)
		binary.BigEndian.PutUint64(a[8:], lo)
		v6 := netip.AddrFrom16(a)
		blocked, reason := Classify(v6)
		if inBlocked && !blocked {
			t.Fatalf("%s embeds blocked %s (form %d) but is allowed", v6, in, form%9)
		}
		if form%9 == 0 && blocked != inBlocked {
			t.Fatalf("mapped %s decided %v (%s), its IPv4 %s decided %v", v6, blocked, reason, in, inBlocked)
		}
	})
}

// FuzzCheckURL: no input panics; a URL whose host means a blocked address
// under any reading (Go's IP parsers, an independent inet_aton) is refused;
// every spelling of a blocked IPv4 address is refused too; an allowed URL
// is http or https and not a localhost name.
func FuzzCheckURL(f *testing.F) {
	for _, name := range []string{"ssrf-blocked.txt", "ssrf-allowed.txt"} {
		for _, raw := range readVectors(f, name) {
			f.Add(raw)
		}
	}
	for _, raw := range []string{
		"http://0x7f.1/", "http://127.1/", "http://0177.0.0.01/", "http://127.0.0.1./",
		"http://good.com@127.0.0.1/", "http://[2001:0:808:808::80ff:fffe]/", "http://LOCALHOST./",
		"http://[fe80::1%25eth0]/", "http://example.com/", "https://a.b.localhost:8443/",
	} {
		f.Add(raw)
	}
	c, err := New(&Options{AnyPublicHost: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := c.Check(raw)
		u, perr := url.Parse(raw)
		if perr != nil {
			if err == nil {
				t.Fatalf("unparseable %q allowed", raw)
			}
			return
		}
		hostname := u.Hostname()
		for _, a := range oracleAddrs(hostname) {
			if blocked, reason := Classify(a); blocked && err == nil {
				t.Fatalf("%q: host %q reads as %s (%s) but was allowed", raw, hostname, a, reason)
			}
		}
		if err == nil {
			if u.Scheme != "http" && u.Scheme != "https" {
				t.Fatalf("%q allowed with scheme %q", raw, u.Scheme)
			}
			if isLocalhostName(strings.TrimSuffix(strings.ToLower(hostname), ".")) {
				t.Fatalf("%q allowed a localhost name", raw)
			}
		}
		for _, a := range oracleAddrs(hostname) {
			if a.Is4() {
				checkSpellings(t, c, a)
			}
		}
	})
}

// checkSpellings writes a in every form the guard must see through.
func checkSpellings(t *testing.T, c *Client, a netip.Addr) {
	b := a.As4()
	u := binary.BigEndian.Uint32(b[:])
	spellings := []string{
		a.String(),
		a.String() + ".",
		strconv.FormatUint(uint64(u), 10),
		fmt.Sprintf("0x%x", u),
		fmt.Sprintf("0%o", u),
		fmt.Sprintf("0%o.0%o.0%o.0%o", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("0x%x.0x%x.0x%x.0x%x", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("%d.%d", b[0], u&0xffffff),
		fmt.Sprintf("%d.%d.%d", b[0], b[1], u&0xffff),
		fmt.Sprintf("[::ffff:%s]", a),
		fmt.Sprintf("[::ffff:%x:%x]", u>>16, u&0xffff),
		fmt.Sprintf("[::%s]", a),
		fmt.Sprintf("[::ffff:0:%s]", a),
		fmt.Sprintf("[64:ff9b::%s]", a),
		fmt.Sprintf("[64:ff9b:1::%s]", a),
		fmt.Sprintf("[2002:%x:%x::1]", u>>16, u&0xffff),
		fmt.Sprintf("[2001:0:808:808::%x:%x]", ^u>>16, ^u&0xffff),
		fmt.Sprintf("[2001:0:%x:%x::f7f7:f7f7]", u>>16, u&0xffff),
		fmt.Sprintf("user@%s:8080", a),
	}
	if blocked, _ := Classify(a); !blocked {
		return
	}
	for _, s := range spellings {
		raw := "http://" + s + "/"
		if err := c.Check(raw); err == nil {
			t.Fatalf("%s is a spelling of blocked %s and was allowed", raw, a)
		}
	}
}

// oracleAddrs reads host as an IP address every way the guard must
// anticipate, using parsers independent of the guard's own.
func oracleAddrs(host string) []netip.Addr {
	var out []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		out = append(out, a)
	}
	if ip := net.ParseIP(host); ip != nil {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a)
		}
	}
	if a, ok := referenceInetAton(strings.TrimSuffix(host, ".")); ok {
		out = append(out, a)
	}
	return out
}

// referenceInetAton is a second, strconv-based inet_aton.
func referenceInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		lp := strings.ToLower(p)
		if p == "" || strings.ContainsAny(p, "_+-") || strings.HasPrefix(lp, "0b") || strings.HasPrefix(lp, "0o") {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var u uint64
	for i, v := range vals {
		if i < len(vals)-1 {
			if v > 255 {
				return netip.Addr{}, false
			}
			u |= v << (24 - 8*i)
			continue
		}
		if v >= 1<<(8*(4-i)) {
			return netip.Addr{}, false
		}
		u |= v
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(u))
	return netip.AddrFrom4(b), true
}
