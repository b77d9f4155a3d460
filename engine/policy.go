package engine

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/babelagent/babel/policy"
)

// Principals are written "kind:id" (local:alice, token:ci-bot, mcp:host,
// a2a:agent); a bare id is a token's principal.
func parsePrincipal(s string) policy.Principal {
	if kind, id, ok := strings.Cut(s, ":"); ok {
		switch kind {
		case policy.KindLocal, policy.KindToken, policy.KindMCP, policy.KindA2A, policy.KindAnonymous:
			return policy.Principal{ID: id, Kind: kind}
		}
	}
	return policy.Principal{ID: s, Kind: policy.KindToken}
}

// authorizer adapts a *policy.Policy to the kernel's seam.
type authorizer struct{ p *policy.Policy }

func (a authorizer) Authorize(_ context.Context, principal, action, resource string) error {
	return a.p.Authorize(parsePrincipal(principal), policy.Action(action), resource)
}

// LocalPrincipal is the CLI's principal: the local user.
func LocalPrincipal(environ []string) string {
	for _, kv := range environ {
		if u, ok := strings.CutPrefix(kv, "USER="); ok && u != "" {
			return "local:" + u
		}
	}
	return "local:" + fmt.Sprint(os.Getuid())
}

// loadPolicy reads the operator's policy file, or gives the default: the
// local user may do everything, nobody else anything.
func loadPolicy(path string, environ []string) (*policy.Policy, error) {
	if path == "" {
		return policy.Default(parsePrincipal(LocalPrincipal(environ)).ID), nil
	}
	p, err := policy.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}
