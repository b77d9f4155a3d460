// Package secrets holds secret values and keeps them from leaking.
//
// A Secret prints, logs and marshals as [REDACTED]; only Reveal gives the
// value, and only code that is about to use it on the wire should call it.
// This package must never write a secret value anywhere.
package secrets

import (
	"fmt"
	"log/slog"
)

// Redacted is what every rendering of a Secret shows.
const Redacted = "[REDACTED]"

// Secret is a named secret value. The zero value is an empty secret.
type Secret struct {
	name  string
	value string
}

// New returns a Secret holding value under name.
func New(name, value string) Secret { return Secret{name: name, value: value} }

// Name is the secret's name (for example OPENAI_API_KEY); it is not secret.
func (s Secret) Name() string { return s.name }

// Reveal returns the value. Call it only where the value goes on the wire.
func (s Secret) Reveal() string { return s.value }

// IsZero reports whether the secret holds no value.
func (s Secret) IsZero() bool { return s.value == "" }

func (s Secret) String() string                { return Redacted }
func (s Secret) GoString() string              { return Redacted }
func (s Secret) MarshalJSON() ([]byte, error)  { return []byte(`"` + Redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(Redacted), nil }
func (s Secret) LogValue() slog.Value          { return slog.StringValue(Redacted) }
func (s Secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(Redacted)) }

var (
	_ fmt.Stringer   = Secret{}
	_ fmt.GoStringer = Secret{}
	_ fmt.Formatter  = Secret{}
	_ slog.LogValuer = Secret{}
)
