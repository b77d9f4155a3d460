package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// localOnly is the zero-config policy: the local user may do anything,
// nobody else anything.
type localOnly struct{ user string }

func (l localOnly) Authorize(_ context.Context, principal, action, resource string) error {
	if principal == l.user {
		return nil
	}
	return fmt.Errorf("principal %q may not %s %s (only the local user %q may, without a policy file)", principal, action, resource, l.user)
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

func loadPolicy(path string, environ []string) (interface {
	Authorize(ctx context.Context, principal, action, resource string) error
}, error) {
	if path == "" {
		return localOnly{user: LocalPrincipal(environ)}, nil
	}
	return nil, fmt.Errorf("policy file %s: policies are not supported yet", path)
}
