package egress

import (
	"encoding/binary"
	"net/netip"
)

// category is the kind of a blocked address; catPublic is the only one a
// connection may go to without an explicit opt-in.
type category uint8

const (
	catPublic category = iota
	catInvalid
	catUnspecified
	catThisNetwork
	catLoopback
	catPrivate
	catShared
	catLinkLocal
	catReserved
	catProtocol
	catDocumentation
	catBenchmarking
	catMulticast
	catBroadcast
	catUniqueLocal
	catSiteLocal
	catDiscard
	catDeprecated
	catLocalNAT64
	catSRv6
)

func (c category) String() string {
	switch c {
	case catPublic:
		return "public address"
	case catInvalid:
		return "invalid address"
	case catUnspecified:
		return "unspecified address"
	case catThisNetwork:
		return "this-network address (0.0.0.0/8)"
	case catLoopback:
		return "loopback address"
	case catPrivate:
		return "private address"
	case catShared:
		return "shared address space (cgnat, 100.64.0.0/10)"
	case catLinkLocal:
		return "link-local address"
	case catReserved:
		return "reserved address"
	case catProtocol:
		return "reserved address (ietf protocol assignments)"
	case catDocumentation:
		return "documentation address"
	case catBenchmarking:
		return "benchmarking address"
	case catMulticast:
		return "multicast address"
	case catBroadcast:
		return "broadcast address"
	case catUniqueLocal:
		return "unique local address (fc00::/7)"
	case catSiteLocal:
		return "site-local address (fec0::/10)"
	case catDiscard:
		return "discard-only address (100::/64)"
	case catDeprecated:
		return "deprecated ipv4-embedding address"
	case catLocalNAT64:
		return "local-use nat64 address (64:ff9b:1::/48)"
	case catSRv6:
		return "segment routing address (5f00::/16)"
	}
	return "unknown address"
}

// verdict is the full outcome of classifying one address. When the address
// embeds an IPv4 address (mapped, compatible, translated, NAT64, 6to4,
// Teredo) and that is what decided, via names the form and inner the
// embedded address.
type verdict struct {
	cat   category
	via   string
	inner netip.Addr
}

func (v verdict) blocked() bool { return v.cat != catPublic }

func (v verdict) reason() string {
	if v.via == "" {
		return v.cat.String()
	}
	if v.inner.IsValid() {
		return v.cat.String() + " (" + v.via + " embedding " + v.inner.String() + ")"
	}
	return v.cat.String() + " (" + v.via + ")"
}

// Classify reports whether a connection to addr is refused and why. It is a
// pure function of addr: allowlists and opt-ins are not consulted. IPv6
// forms that embed an IPv4 address are decoded and decided on the embedded
// address; an IPv4-mapped address is decided as the IPv4 address it is. A
// zone is ignored. The invalid (zero) Addr is blocked.
func Classify(addr netip.Addr) (blocked bool, reason string) {
	v := classify(addr)
	if !v.blocked() {
		return false, ""
	}
	return true, v.reason()
}

func classify(addr netip.Addr) verdict {
	switch {
	case !addr.IsValid():
		return verdict{cat: catInvalid}
	case addr.Is4():
		return verdict{cat: classify4(addr.As4())}
	}
	return classify6(addr.As16())
}

func classify4(a [4]byte) category {
	switch {
	case a[0] == 0:
		if a == [4]byte{} {
			return catUnspecified
		}
		return catThisNetwork
	case a[0] == 10:
		return catPrivate
	case a[0] == 100 && a[1]&0xc0 == 64:
		return catShared
	case a[0] == 127:
		return catLoopback
	case a[0] == 169 && a[1] == 254:
		return catLinkLocal
	case a[0] == 172 && a[1]&0xf0 == 16:
		return catPrivate
	case a[0] == 192 && a[1] == 0 && a[2] == 0:
		return catProtocol
	case a[0] == 192 && a[1] == 0 && a[2] == 2,
		a[0] == 198 && a[1] == 51 && a[2] == 100,
		a[0] == 203 && a[1] == 0 && a[2] == 113:
		return catDocumentation
	case a[0] == 192 && a[1] == 88 && a[2] == 99:
		return catReserved // 6to4 relay anycast, deprecated
	case a[0] == 192 && a[1] == 168:
		return catPrivate
	case a[0] == 198 && a[1]&0xfe == 18:
		return catBenchmarking
	case a[0] >= 224 && a[0] < 240:
		return catMulticast
	case a == [4]byte{255, 255, 255, 255}:
		return catBroadcast
	case a[0] >= 240:
		return catReserved
	}
	return catPublic
}

func v4of(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

// embedded decides an IPv6 address that carries an IPv4 one: blocked when
// the IPv4 address is, else otherwise (catPublic or the form's own
// category).
func embedded(via string, v4 uint32, otherwise category) verdict {
	in := v4of(v4)
	if c := classify4(in.As4()); c != catPublic {
		return verdict{cat: c, via: via, inner: in}
	}
	if otherwise == catPublic {
		return verdict{cat: catPublic}
	}
	return verdict{cat: otherwise, via: via, inner: in}
}

func classify6(a [16]byte) verdict {
	hi := binary.BigEndian.Uint64(a[:8])
	lo := binary.BigEndian.Uint64(a[8:])
	switch {
	case hi == 0 && lo == 0:
		return verdict{cat: catUnspecified}
	case hi == 0 && lo == 1:
		return verdict{cat: catLoopback}
	case hi == 0 && lo>>32 == 0xffff:
		// IPv4-mapped: the kernel dials it as the IPv4 address.
		return embedded("ipv4-mapped", uint32(lo), catPublic)
	case hi == 0 && lo>>32 == 0:
		return embedded("ipv4-compatible", uint32(lo), catDeprecated)
	case hi == 0 && lo>>32 == 0xffff0000:
		return embedded("ipv4-translated", uint32(lo), catDeprecated)
	case hi == 0x0064_ff9b_0000_0000 && lo>>32 == 0:
		// RFC 6052 well-known NAT64 prefix: the gateway connects to the
		// embedded IPv4 address.
		return embedded("nat64", uint32(lo), catPublic)
	case hi>>16 == 0x0064_ff9b_0001:
		// RFC 8215 local-use prefix: never globally reachable. Name the
		// embedded address (RFC 6052 /96 position) when it is itself bad.
		return embedded("local-use nat64", uint32(lo), catLocalNAT64)
	case hi>>48 == 0x2002:
		return embedded("6to4", uint32(hi>>16), catPublic)
	case hi>>32 == 0x2001_0000:
		// Teredo: server IPv4 in bits 32..63, client IPv4 obfuscated
		// (inverted) in the last 32 bits. Either being bad blocks.
		if v := embedded("teredo server", uint32(hi), catPublic); v.blocked() {
			return v
		}
		return embedded("teredo client", ^uint32(lo), catPublic)
	case hi>>48 == 0x2001 && (hi>>32)&0xffff < 0x0200:
		return verdict{cat: catProtocol} // rest of 2001::/23
	case hi>>32 == 0x2001_0db8, hi>>44 == 0x3fff0:
		return verdict{cat: catDocumentation}
	case hi>>48 == 0x5f00:
		return verdict{cat: catSRv6}
	case a[0]&0xe0 == 0x20:
		return verdict{cat: catPublic} // 2000::/3, global unicast
	case a[0] == 0xff:
		return verdict{cat: catMulticast}
	case a[0]&0xfe == 0xfc:
		return verdict{cat: catUniqueLocal}
	case a[0] == 0xfe && a[1]&0xc0 == 0x80:
		return verdict{cat: catLinkLocal}
	case a[0] == 0xfe && a[1]&0xc0 == 0xc0:
		return verdict{cat: catSiteLocal}
	case hi == 0x0100_0000_0000_0000:
		return verdict{cat: catDiscard}
	}
	// Outside 2000::/3 nothing else is allocated for global unicast.
	return verdict{cat: catReserved}
}
