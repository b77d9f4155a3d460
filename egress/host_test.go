package egress

import "testing"

func TestOddIPv4SpellingsParseLikeInetAton(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1":        "127.0.0.1",
		"2130706433":       "127.0.0.1",
		"0177.0.0.1":       "127.0.0.1",
		"0x7f.1":           "127.0.0.1",
		"0X7F.0.0.0X1":     "127.0.0.1",
		"127.1":            "127.0.0.1",
		"127.0.1":          "127.0.0.1",
		"0x7f000001":       "127.0.0.1",
		"017700000001":     "127.0.0.1",
		"0":                "0.0.0.0",
		"0x":               "0.0.0.0",
		"169.16689662":     "169.254.169.254",
		"0xa9.0xfe.0xa9fe": "169.254.169.254",
		"4294967295":       "255.255.255.255",
		"00000010.0.0.5":   "8.0.0.5",
	}
	for in, want := range cases {
		a, ok := parseIPv4(in)
		if !ok || a.String() != want {
			t.Errorf("parseIPv4(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{
		"", "1.2.3.4.5", "256.1.1.1", "1.16777216", "1.2.65536", "1.2.3.256",
		"08", "0x1g", "4294967296", "0x100000000", "1..2", "1.2.3.", "-1", "+1", "1_0",
	} {
		if a, ok := parseIPv4(in); ok {
			t.Errorf("parseIPv4(%q) = %v, want failure", in, a)
		}
	}
}

func TestHostNormalization(t *testing.T) {
	cases := []struct {
		in, name, reason string
		ip               bool
	}{
		{in: "Example.COM.", name: "example.com"},
		{in: "127.0.0.1.", name: "127.0.0.1", ip: true},
		{in: "0x7F.1.", name: "127.0.0.1", ip: true},
		{in: "::FFFF:7F00:1", name: "::ffff:127.0.0.1", ip: true},
		{in: "fe80::1%eth0", name: "fe80::1%eth0", ip: true},
		{in: "a.1", reason: "malformed ipv4 address"},
		{in: "7f.0.0.1", reason: "malformed ipv4 address"},
		{in: "1.2.3.4.5", reason: "malformed ipv4 address"},
		{in: "example..com", reason: "malformed host name (empty label)"},
		{in: "example.com..", reason: "malformed host name (empty label)"},
		{in: ".example.com", reason: "malformed host name (empty label)"},
		{in: "ｌocalhost", reason: "non-ascii host name (use its punycode form)"},
		{in: "exa mple.com", reason: "invalid character in host name"},
		{in: "::ffff:0177.0.0.1", reason: "malformed ipv6 address"},
		{in: ".", reason: "missing host"},
		{in: "", reason: "missing host"},
	}
	for _, tc := range cases {
		h, reason := parseHost(tc.in)
		if reason != tc.reason || h.name != tc.name || h.addr.IsValid() != tc.ip {
			t.Errorf("parseHost(%q) = %+v, %q; want name %q ip %v reason %q", tc.in, h, reason, tc.name, tc.ip, tc.reason)
		}
	}
	for _, n := range []string{"localhost", "localhost.localdomain", "a.localhost", "a.b.localhost", "ip6-localhost"} {
		if !isLocalhostName(n) {
			t.Errorf("%s is not a localhost name", n)
		}
	}
	for _, n := range []string{"localhost.example.com", "notlocalhost", "localhostx"} {
		if isLocalhostName(n) {
			t.Errorf("%s is a localhost name", n)
		}
	}
}
