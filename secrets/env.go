package secrets

import (
	"context"
	"strings"
)

// Env is a Source over an explicit snapshot of environment variables, such
// as os.Environ() taken once by the CLI at startup. It never reads the live
// process environment, and it answers only for the name it is asked about.
// A variable that is set but empty counts as not found.
type Env struct {
	vars map[string]Secret
}

// NewEnv returns an Env over environ, a list of KEY=VALUE entries. Later
// entries win over earlier ones with the same key, as in os/exec. environ is
// copied; the caller may reuse it.
func NewEnv(environ []string) *Env {
	vars := make(map[string]Secret, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		vars[k] = New(k, v)
	}
	return &Env{vars: vars}
}

// Lookup returns the variable named name from the snapshot.
func (e *Env) Lookup(ctx context.Context, name string) (Secret, error) {
	if err := CheckName(name); err != nil {
		return Secret{}, err
	}
	if err := ctx.Err(); err != nil {
		return Secret{}, err
	}
	if e != nil {
		if s, ok := e.vars[name]; ok && !s.IsZero() {
			return s, nil
		}
	}
	return Secret{}, &NotFoundError{Name: name, Source: "env"}
}

func (e *Env) String() string { return "env" }

var _ Source = (*Env)(nil)
