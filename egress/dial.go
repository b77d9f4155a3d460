package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Dialer returns a *net.Dialer whose connect-time control refuses blocked
// addresses (AllowPrivate opt-ins apply). It decides on addresses only: it
// neither checks the allowlist nor uses the client's Resolver. Prefer
// DialContext, which does both.
func (c *Client) Dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:        c.connectTO,
		KeepAlive:      30 * time.Second,
		ControlContext: c.control(""),
	}
}

// DialContext connects to address ("host:port") over tcp, tcp4 or tcp6
// under the client's full policy: the host is checked like a URL's, a name
// is resolved with the client's Resolver, and each address is decided again
// by the socket's control hook right before connect, so the address that is
// refused or allowed is the one actually dialed. The connection's bytes are
// counted. It is the DialContext of the HTTP transport, and fits
// http.Transport.DialContext for any other client that must obey the same
// policy.
func (c *Client) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &PolicyError{Reason: "network " + strconv.Quote(network) + " not allowed"}
	}
	if c.proxyAddr != "" && address == c.proxyAddr {
		d := net.Dialer{Timeout: c.connectTO, KeepAlive: 30 * time.Second}
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return c.count(conn), nil
	}
	hostPart, portPart, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &PolicyError{Reason: "malformed dial address"}
	}
	port, reason := portOf("", portPart)
	if reason != "" || portPart == "" {
		return nil, &PolicyError{Host: hostPart, Reason: "invalid port"}
	}
	h, err := c.checkHost(hostPart, port)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.connectTO)
	defer cancel()
	addrs, err := c.lookup(ctx, h, network)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{KeepAlive: 30 * time.Second, ControlContext: c.control(h.name)}
	var first error
	for i, a := range addrs {
		actx, acancel := attemptContext(ctx, len(addrs)-i)
		conn, err := d.DialContext(actx, network, netip.AddrPortFrom(a, port).String())
		acancel()
		if err == nil {
			return c.count(conn), nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// attemptContext gives one of the remaining addresses its share of the time
// left, at least two seconds when there is that much, as net.Dialer does.
func attemptContext(ctx context.Context, remaining int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || remaining <= 1 {
		return context.WithCancel(ctx)
	}
	left := time.Until(deadline)
	share := left / time.Duration(remaining)
	if share < 2*time.Second {
		share = min(2*time.Second, left)
	}
	return context.WithTimeout(ctx, share)
}

// lookup returns the addresses to dial for h: the literal itself, or the
// resolver's answers of the network's family. Answers are not judged here;
// the control hook judges each at connect time.
func (c *Client) lookup(ctx context.Context, h host, network string) ([]netip.Addr, error) {
	if h.addr.IsValid() {
		return []netip.Addr{h.addr}, nil
	}
	ips, err := c.resolver.LookupIPAddr(ctx, h.name)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %s: %w", h.name, err)
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			continue
		}
		a = a.Unmap().WithZone(ip.Zone)
		if network == "tcp4" && !a.Is4() || network == "tcp6" && !a.Is6() {
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("egress: resolve %s: no usable address", h.name)
	}
	return out, nil
}

// control is the connect-time decision: it runs after the socket is created
// and before connect(2), on the address being connected to.
func (c *Client) control(hostName string) func(ctx context.Context, network, address string, _ syscall.RawConn) error {
	return func(_ context.Context, network, address string, _ syscall.RawConn) error {
		switch network {
		case "tcp4", "tcp6":
		default:
			return &PolicyError{Host: hostName, Reason: "network " + strconv.Quote(network) + " not allowed"}
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &PolicyError{Host: hostName, Reason: "unparseable dial address"}
		}
		return c.checkDialed(hostName, ap)
	}
}

var _ Resolver = (*net.Resolver)(nil)
