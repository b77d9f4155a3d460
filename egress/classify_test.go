package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClassifyBlocksEveryNonPublicRange(t *testing.T) {
	cases := []struct {
		addr   string
		reason string // substring; "" means public
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.1", ""},
		{"172.15.255.255", ""},
		{"172.32.0.1", ""},
		{"192.0.1.1", ""},
		{"198.20.0.1", ""},
		{"223.255.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"2620:4f:8000::1", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::1", ""},
		{"2001:0:808:808::f7f7:f7f7", ""}, // Teredo, server and client 8.8.8.8

		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"10.0.0.5", "private"},
		{"100.64.0.1", "cgnat"},
		{"100.127.255.255", "cgnat"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"169.254.169.254", "link-local"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.0.0.8", "protocol"},
		{"192.0.2.1", "documentation"},
		{"192.88.99.1", "reserved"},
		{"192.168.1.1", "private"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.7", "documentation"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},

		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback address (ipv4-mapped embedding 127.0.0.1)"},
		{"::ffff:169.254.169.254", "link-local address (ipv4-mapped"},
		{"::a9fe:a9fe", "link-local address (ipv4-compatible embedding 169.254.169.254)"},
		{"::808:808", "deprecated"},
		{"::ffff:0:7f00:1", "loopback address (ipv4-translated"},
		{"::ffff:0:808:808", "deprecated"},
		{"64:ff9b::7f00:1", "loopback address (nat64 embedding 127.0.0.1)"},
		{"64:ff9b::a9fe:a9fe", "link-local address (nat64"},
		{"64:ff9b::a00:5", "private address (nat64"},
		{"64:ff9b:1::a00:5", "private address (local-use nat64"},
		{"64:ff9b:1::808:808", "local-use nat64"},
		{"2002:a9fe:a9fe::", "link-local address (6to4 embedding 169.254.169.254)"},
		{"2002:7f00:1:1::1", "loopback address (6to4"},
		{"2002:c0a8:101::1", "private address (6to4"},
		{"2001:0:808:808::80ff:fffe", "loopback address (teredo client embedding 127.0.0.1)"},
		{"2001:0:a00:1::f7f7:f7f7", "private address (teredo server embedding 10.0.0.1)"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "documentation address (teredo client embedding 192.0.2.45)"}, // RFC 4380's example
		{"2001:2::1", "protocol"},
		{"2001:10::1", "protocol"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"5f00::1", "segment routing"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"100::1", "discard"},
		{"4000::1", "reserved"},
		{"e000::1", "reserved"},
	}
	for _, tc := range cases {
		blocked, reason := Classify(netip.MustParseAddr(tc.addr))
		switch {
		case tc.reason == "" && blocked:
			t.Errorf("Classify(%s) blocked (%s), want public", tc.addr, reason)
		case tc.reason != "" && !blocked:
			t.Errorf("Classify(%s) public, want blocked (%s)", tc.addr, tc.reason)
		case tc.reason != "" && !strings.Contains(reason, tc.reason):
			t.Errorf("Classify(%s) reason %q, want it to contain %q", tc.addr, reason, tc.reason)
		}
	}
	if blocked, _ := Classify(netip.Addr{}); !blocked {
		t.Error("the zero Addr is not blocked")
	}
}
