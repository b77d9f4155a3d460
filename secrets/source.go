package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Source looks secrets up by name.
//
// Lookup returns the secret named name, a *NotFoundError when the source
// does not hold it, an *UnavailableError when the source cannot be consulted
// at all here (for example no keyring), or another error when the source is
// misconfigured. A Source looks up only the name it is asked for, and its
// errors never contain a secret value. Lookup may be called concurrently.
type Source interface {
	Lookup(ctx context.Context, name string) (Secret, error)
}

// NotFoundError says that no source holds the named secret.
type NotFoundError struct {
	Name   string // the secret's name
	Source string // where it was looked for, e.g. "env" or "file /etc/babel/secrets"
}

func (e *NotFoundError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("secret %s not found", e.Name)
	}
	return fmt.Sprintf("secret %s not found in %s", e.Name, e.Source)
}

// UnavailableError says that a source cannot be used here at all: a tool it
// needs is missing, or the service behind it does not answer.
type UnavailableError struct {
	Source string
	Reason string
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("secret source %s is unavailable: %s", e.Source, e.Reason)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// maxNameLen bounds a secret name; names end up in argv and error text.
const maxNameLen = 128

// CheckName reports whether name is a valid secret name: an ASCII letter or
// underscore, then letters, digits and underscores, at most 128 bytes (the
// shape of an environment variable name, e.g. OPENAI_API_KEY).
func CheckName(name string) error {
	if name == "" {
		return errors.New("secret name is empty")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("secret name %.32q... is longer than %d bytes", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return fmt.Errorf("secret name %q is invalid: want letters, digits and underscores, not starting with a digit", name)
		}
	}
	return nil
}

// Chain is a list of sources consulted in order: the first that holds a
// name wins. A source that does not hold the name, or is unavailable, is
// skipped; any other error stops the lookup, so that a broken source (say a
// secrets file with loose permissions) is reported rather than silently
// passed over for a later one.
type Chain []Source

// Lookup returns the secret from the first source that holds it.
func (c Chain) Lookup(ctx context.Context, name string) (Secret, error) {
	if err := CheckName(name); err != nil {
		return Secret{}, err
	}
	var tried []string
	for _, src := range c {
		if err := ctx.Err(); err != nil {
			return Secret{}, err
		}
		s, err := src.Lookup(ctx, name)
		if err == nil {
			return s, nil
		}
		var nf *NotFoundError
		var un *UnavailableError
		switch {
		case errors.As(err, &nf):
			tried = append(tried, describe(src))
		case errors.As(err, &un):
			tried = append(tried, describe(src)+" (unavailable)")
		default:
			return Secret{}, fmt.Errorf("looking up %s in %s: %w", name, describe(src), err)
		}
	}
	if len(tried) == 0 {
		return Secret{}, &NotFoundError{Name: name, Source: "an empty chain"}
	}
	return Secret{}, &NotFoundError{Name: name, Source: strings.Join(tried, ", ")}
}

func (c Chain) String() string {
	parts := make([]string, len(c))
	for i, s := range c {
		parts[i] = describe(s)
	}
	return "chain(" + strings.Join(parts, ", ") + ")"
}

// describe names a source for error messages without printing its contents.
func describe(s Source) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s)
}

var _ Source = Chain(nil)
