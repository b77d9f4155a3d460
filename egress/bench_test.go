package egress

import (
	"net/netip"
	"testing"
)

// BenchmarkGuardDecision measures what DialContext decides per dial: the
// host check (syntax, localhost names, allowlist) and the connect-time
// address decision.
func BenchmarkGuardDecision(b *testing.B) {
	c := mustNew(b, &Options{Allowlist: []string{
		"api.openai.com", "api.anthropic.com", "classify.example.com", "tickets.example.com",
		"*.googleapis.com", "*.corp.example", "8.8.8.8", "a2a.example.org",
	}})
	cases := []struct {
		name, host string
		addr       netip.AddrPort
	}{
		{"exact-v4", "api.anthropic.com", netip.MustParseAddrPort("160.79.104.10:443")},
		{"wildcard-v6", "storage.googleapis.com", netip.MustParseAddrPort("[2607:f8b0:4004:c1b::cf]:443")},
		{"nat64", "x.corp.example", netip.MustParseAddrPort("[64:ff9b::808:808]:443")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.checkHost(tc.host, 443); err != nil {
					b.Fatal(err)
				}
				if err := c.checkDialed(tc.host, tc.addr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("refused-embedded", func(b *testing.B) {
		a := netip.MustParseAddrPort("[2001:0:808:808::80ff:fffe]:443")
		b.ReportAllocs()
		for b.Loop() {
			if c.checkDialed("x", a) == nil {
				b.Fatal("allowed")
			}
		}
	})
}

func BenchmarkCheckURL(b *testing.B) {
	c := mustNew(b, &Options{Allowlist: []string{"api.example.com"}})
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Check("https://api.example.com/v1/chat?x=1"); err != nil {
			b.Fatal(err)
		}
	}
}
