package http

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
)

// Egress builds the guarded client of an agent that connects to urls.
//
// base is a template (timeouts, body cap, resolver, TLS roots, proxy; nil
// means egress's defaults). The hosts a request may reach are, for a node
// of a topology (node non-nil), its declared egress list when it has one,
// else the hosts of urls themselves: a URL written in a topology is a
// declaration of where the node goes. Without a node (the Go API) they are
// base.Allowlist, or the hosts of urls when that is empty. The private
// targets opted in are base.AllowPrivate and the node's allow_private.
// AnyPublicHost is never honoured: an agent always has an allowlist.
//
// Each url is checked now, so a topology naming a blocked address (a
// metadata service, a private range, a non-HTTP scheme) fails to compile
// with an *egress.PolicyError; the address actually dialed is checked again
// on every request. It returns the client and the allowlist, for the card.
func Egress(base *egress.Options, node *graph.NodeSpec, urls ...string) (*egress.Client, []string, error) {
	var o egress.Options
	if base != nil {
		o = *base
	}
	o.AnyPublicHost = false
	switch {
	case node != nil && node.Egress != nil:
		o.Allowlist = slices.Clone(node.Egress)
	case node == nil && len(o.Allowlist) > 0:
		o.Allowlist = slices.Clone(o.Allowlist)
	default:
		o.Allowlist = nil
		for _, raw := range urls {
			if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
				if h := strings.ToLower(u.Hostname()); !slices.Contains(o.Allowlist, h) {
					o.Allowlist = append(o.Allowlist, h)
				}
			}
		}
	}
	o.AllowPrivate = slices.Clone(o.AllowPrivate)
	if node != nil {
		o.AllowPrivate = append(o.AllowPrivate, node.AllowPrivate...)
	}
	c, err := egress.New(&o)
	if err != nil {
		return nil, nil, err
	}
	for _, raw := range urls {
		if err := c.Check(raw); err != nil {
			return nil, nil, withPrivateHint(raw, err)
		}
	}
	return c, o.Allowlist, nil
}

// withPrivateHint adds to a refusal of a local address how to opt it in on
// purpose (a local Ollama, a test server), so the error names the fix.
func withPrivateHint(raw string, err error) error {
	var pe *egress.PolicyError
	if !errors.As(err, &pe) {
		return err
	}
	r := pe.Reason
	if !strings.Contains(r, "loopback") && !strings.Contains(r, "private") && !strings.Contains(r, "shared") &&
		!strings.Contains(r, "unique local") && !strings.Contains(r, "localhost") {
		return err
	}
	target := egress.AllowPrivateURL(raw)
	if ap, perr := netip.ParseAddrPort(target); perr == nil && ap.Addr().IsValid() {
		return fmt.Errorf("%w (to reach this local service on purpose, add allow_private: [%q] to the node)", err, target)
	}
	return fmt.Errorf("%w (to reach a local service on purpose, write its IP address in the url and list it under the node's allow_private)", err)
}
