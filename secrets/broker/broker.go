// Package broker gives each node call exactly the secrets its node declared,
// resolved at call time, and registers every value it hands out with the
// Redactor that scrubs outputs, traces, logs, errors and audit records.
//
// It must never return a secret that was not asked for, never enumerate a
// source, and never put a secret value in an error.
package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/secrets"
)

// Broker resolves declared secret names against a Source. It is safe for
// concurrent use.
type Broker struct {
	src secrets.Source
	red *secrets.Redactor
}

// New returns a Broker over src that registers what it resolves with red. A
// nil src holds no secrets, so every declared name is missing; a nil red
// means a fresh Redactor, available from Redactor.
func New(src secrets.Source, red *secrets.Redactor) *Broker {
	if red == nil {
		red = secrets.NewRedactor()
	}
	return &Broker{src: src, red: red}
}

// Redactor returns the Redactor every resolved value is registered with.
func (b *Broker) Redactor() *secrets.Redactor { return b.red }

// Scope resolves names (a node's declared secrets) and returns a set holding
// those and nothing else. Each value is registered with the Redactor before
// Scope returns. When any declared secret is missing the error names every
// missing one (errors.As finds a *secrets.NotFoundError) and no set is
// returned; an invalid name or a broken source is an error too. Values
// shorter than secrets.MinRegisterLen cannot be redacted and are refused.
func (b *Broker) Scope(ctx context.Context, names []string) (*agent.Secrets, error) {
	if len(names) == 0 {
		return agent.NewSecrets(), nil
	}
	uniq := slices.Clone(names)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	for _, n := range uniq {
		if err := secrets.CheckName(n); err != nil {
			return nil, fmt.Errorf("scoping secrets: %w", err)
		}
	}
	if b == nil {
		return nil, errors.New("scoping secrets: no secrets broker configured")
	}
	var (
		got     = make([]secrets.Secret, 0, len(uniq))
		missing []error
	)
	for _, n := range uniq {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("scoping secrets: %w", err)
		}
		s, err := b.lookup(ctx, n)
		var nf *secrets.NotFoundError
		switch {
		case errors.As(err, &nf):
			missing = append(missing, err)
			continue
		case err != nil:
			return nil, fmt.Errorf("scoping secret %s: %w", n, err)
		}
		// Name the secret as declared, whatever the source called it.
		s = secrets.New(n, s.Reveal())
		b.red.Register(s.Reveal())
		if len(s.Reveal()) < secrets.MinRegisterLen {
			return nil, fmt.Errorf("scoping secret %s: value is shorter than %d bytes and could not be redacted; use a longer secret",
				n, secrets.MinRegisterLen)
		}
		got = append(got, s)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("scoping secrets: declared secrets are missing: %w", errors.Join(missing...))
	}
	return agent.NewSecrets(got...), nil
}

func (b *Broker) lookup(ctx context.Context, name string) (secrets.Secret, error) {
	if b.src == nil {
		return secrets.Secret{}, &secrets.NotFoundError{Name: name, Source: "no source"}
	}
	s, err := b.src.Lookup(ctx, name)
	if err == nil && s.IsZero() {
		return secrets.Secret{}, &secrets.NotFoundError{Name: name, Source: describe(b.src)}
	}
	return s, err
}

func describe(s secrets.Source) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s)
}
