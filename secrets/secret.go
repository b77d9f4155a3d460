// Package secrets holds secret values and keeps them from leaking.
//
// A Secret prints, logs and marshals as [REDACTED]; only Reveal gives the
// value, and only code that is about to use it on the wire should call it.
// Sources (Env, File, Keyring, Chain) look a secret up by name, and only the
// names they are asked for. A Redactor scrubs registered values and common
// credential patterns from text, JSON and log records; package broker hands a
// node exactly the secrets it declared and registers each value it resolves.
//
// This package must never write a secret value anywhere: not to a log, an
// error, a file or a child process's environment. It never reads the process
// environment on its own and never loads anything from the working directory.
package secrets

import (
	"fmt"
	"log/slog"
)

// Redacted is what every rendering of a Secret shows.
const Redacted = "[REDACTED]"

// Secret is a named secret value. The zero value is an empty secret.
//
// The value sits behind a pointer so that even reflection-driven printing
// that bypasses the methods below (fmt on a struct holding a Secret in an
// unexported field, where fmt cannot call methods) shows an address, never
// the value.
//
// It is a *string rather than a pointer to a struct because fmt, printing a
// pointer with a verb it does not suit (%s of a *T), dereferences pointers to
// structs, slices and maps at the top level but prints any other pointer as
// an address.
type Secret struct {
	name string
	v    *string
}

// New returns a Secret holding value under name.
func New(name, value string) Secret {
	if value == "" {
		return Secret{name: name}
	}
	return Secret{name: name, v: &value}
}

// Name is the secret's name (for example OPENAI_API_KEY); it is not secret.
func (s Secret) Name() string { return s.name }

// Reveal returns the value. Call it only where the value goes on the wire.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether the secret holds no value.
func (s Secret) IsZero() bool { return s.v == nil || *s.v == "" }

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
