package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxCanonicalDepth bounds nesting so hostile input cannot exhaust the stack.
const maxCanonicalDepth = 256

// Canonical returns the canonical JSON encoding of v: object keys sorted
// bytewise by their UTF-8 encoding, no insignificant whitespace, numbers
// kept exactly as written, and strings escaped as RFC 8785 does (only '"',
// '\\' and control characters; \b \f \n \r \t in short form, others as
// \u00xx), with invalid UTF-8 replaced by U+FFFD. A json.RawMessage or a
// []byte is taken as JSON text; any other value is first encoded with
// encoding/json (so a json.Marshaler's own output is what gets
// canonicalized). Duplicate object
// keys are an error, because two parsers could disagree on which one
// counts, and an approval bound to one reading must not authorize the other.
func Canonical(v any) ([]byte, error) {
	var raw []byte
	switch t := v.(type) {
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("audit: canonical json: %w", err)
		}
		raw = b
	}
	out, err := canonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("audit: canonical json: %w", err)
	}
	return out, nil
}

// canonicalJSON is Canonical for JSON text, with errors unprefixed.
func canonicalJSON(raw []byte) ([]byte, error) {
	p := canonParser{in: raw, out: make([]byte, 0, len(raw))}
	if err := p.value(0); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("trailing data after the value")
	}
	return p.out, nil
}

// Digest returns the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonParser parses JSON text and writes its canonical form as it goes.
type canonParser struct {
	in  []byte
	pos int
	out []byte
}

func (p *canonParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *canonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *canonParser) value(depth int) error {
	if depth > maxCanonicalDepth {
		return p.errorf("nesting deeper than %d", maxCanonicalDepth)
	}
	p.skipSpace()
	if p.pos >= len(p.in) {
		return p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		_, err := p.str()
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return p.errorf("invalid character %q", c)
	}
}

func (p *canonParser) literal(lit string) error {
	if !strings.HasPrefix(string(p.in[p.pos:min(p.pos+len(lit), len(p.in))]), lit) {
		return p.errorf("invalid literal")
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *canonParser) number() error {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.in[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.in) && p.in[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return p.errorf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errorf("invalid number")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errorf("invalid number")
		}
	}
	p.out = append(p.out, p.in[start:p.pos]...)
	return nil
}

// str parses a string token, writes its canonical form and returns its
// decoded value.
func (p *canonParser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	// Fast path: no escapes, no control characters, valid UTF-8. Such a
	// string is already canonical.
	for i := p.pos; i < len(p.in); {
		c := p.in[i]
		switch {
		case c == '"':
			p.pos = i + 1
			p.out = append(p.out, p.in[start:p.pos]...)
			return string(p.in[start+1 : i]), nil
		case c == '\\' || c < 0x20:
			return p.slowStr(start)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(p.in[i:])
			if r == utf8.RuneError && size == 1 {
				return p.slowStr(start)
			}
			i += size
		}
	}
	return "", p.errorf("unterminated string")
}

// slowStr handles a string with escapes or invalid UTF-8 by letting
// encoding/json decode it, then re-encoding it canonically.
func (p *canonParser) slowStr(start int) (string, error) {
	i := start + 1
	for ; i < len(p.in); i++ {
		if p.in[i] == '\\' {
			i++
			continue
		}
		if p.in[i] == '"' {
			break
		}
	}
	if i >= len(p.in) {
		p.pos = start
		return "", p.errorf("unterminated string")
	}
	var s string
	if err := json.Unmarshal(p.in[start:i+1], &s); err != nil {
		p.pos = start
		return "", p.errorf("invalid string: %v", err)
	}
	p.pos = i + 1
	p.out = appendCanonString(p.out, s)
	return s, nil
}

const hexDigits = "0123456789abcdef"

func appendCanonString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		case c < utf8.RuneSelf:
			out = append(out, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(out, '"')
}

func (p *canonParser) array(depth int) error {
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.errorf("unterminated array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return nil
		default:
			return p.errorf("invalid character %q in array", p.in[p.pos])
		}
	}
}

func (p *canonParser) object(depth int) error {
	p.pos++ // '{'
	objStart := len(p.out)
	p.out = append(p.out, '{')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return nil
	}
	// Members are written in input order, then rewritten sorted.
	type member struct {
		key        string
		start, end int // "key":value in p.out
	}
	var members []member
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.errorf("object key must be a string")
		}
		if len(members) > 0 {
			p.out = append(p.out, ',')
		}
		start := len(p.out)
		key, err := p.str()
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.errorf("missing ':' after object key")
		}
		p.pos++
		p.out = append(p.out, ':')
		if err := p.value(depth + 1); err != nil {
			return err
		}
		members = append(members, member{key, start, len(p.out)})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.errorf("unterminated object")
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return p.errorf("invalid character %q in object", p.in[p.pos])
		}
		p.pos++
	}
	increasing := true
	for i := 1; i < len(members) && increasing; i++ {
		increasing = members[i-1].key < members[i].key
	}
	if !increasing {
		region := slices.Clone(p.out[objStart:])
		slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
		p.out = p.out[:objStart+1]
		for i, m := range members {
			if i > 0 {
				if members[i-1].key == m.key {
					return fmt.Errorf("duplicate object key %q", m.key)
				}
				p.out = append(p.out, ',')
			}
			p.out = append(p.out, region[m.start-objStart:m.end-objStart]...)
		}
	}
	p.out = append(p.out, '}')
	return nil
}
