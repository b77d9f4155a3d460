package egress

import (
	"fmt"
	"strings"
)

// allowlist holds exact host names and IP addresses, and "*.suffix"
// wildcards stored as ".suffix".
type allowlist struct {
	exact    map[string]struct{}
	suffixes []string
}

func newAllowlist(entries []string) (allowlist, error) {
	a := allowlist{exact: make(map[string]struct{}, len(entries))}
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e, "*."); ok {
			h, reason := parseHost(rest)
			switch {
			case reason != "":
				return a, fmt.Errorf("egress: allowlist entry %q: %s", e, reason)
			case h.addr.IsValid():
				return a, fmt.Errorf("egress: allowlist entry %q: wildcard over an ip address", e)
			case !strings.Contains(h.name, "."):
				return a, fmt.Errorf("egress: allowlist entry %q: wildcard over a top-level domain", e)
			}
			a.suffixes = append(a.suffixes, "."+h.name)
			continue
		}
		if strings.Contains(e, "*") {
			return a, fmt.Errorf("egress: allowlist entry %q: only a leading \"*.\" wildcard is supported", e)
		}
		h, reason := parseHost(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"))
		if reason != "" {
			return a, fmt.Errorf("egress: allowlist entry %q: %s", e, reason)
		}
		a.exact[h.key()] = struct{}{}
	}
	return a, nil
}

func (a allowlist) match(h host) bool {
	if _, ok := a.exact[h.key()]; ok {
		return true
	}
	if h.addr.IsValid() {
		return false
	}
	for _, s := range a.suffixes {
		if len(h.name) > len(s) && strings.HasSuffix(h.name, s) {
			return true
		}
	}
	return false
}

// key is what the allowlist compares: the name, or the address without zone
// and with IPv4-mapped addresses unmapped.
func (h host) key() string {
	if h.addr.IsValid() {
		return h.addr.WithZone("").Unmap().String()
	}
	return h.name
}
