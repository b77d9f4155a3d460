package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// maxCanonicalDepth bounds nesting so hostile input cannot exhaust the stack.
const maxCanonicalDepth = 256

// Canonical returns the canonical JSON encoding of v: object keys sorted
// (bytewise, by their UTF-8 encoding), no insignificant whitespace, no HTML
// escaping, numbers kept exactly as written. A json.RawMessage is taken as
// JSON text; any other value is first encoded with encoding/json (so a
// json.Marshaler's own output is what gets canonicalized). Duplicate object keys are an error, because two
// parsers could disagree on which one counts, and an approval bound to one
// reading must not authorize the other.
func Canonical(v any) ([]byte, error) {
	var raw []byte
	switch t := v.(type) {
	case json.RawMessage:
		raw = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("audit: canonical json: %w", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(raw))
	if err := canonValue(dec, &out, 0); err != nil {
		return nil, fmt.Errorf("audit: canonical json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("audit: canonical json: trailing data after the value")
	}
	return out.Bytes(), nil
}

// Digest returns the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func canonValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > maxCanonicalDepth {
		return fmt.Errorf("nesting deeper than %d", maxCanonicalDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty input")
		}
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonObject(dec, out, depth)
		case '[':
			return canonArray(dec, out, depth)
		}
		return fmt.Errorf("unexpected %q", t)
	case string:
		writeString(out, t)
	case json.Number:
		out.WriteString(t.String())
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %v", tok)
	}
	return nil
}

func canonObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	type member struct {
		key string
		val []byte
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is %v, not a string", tok)
		}
		var val bytes.Buffer
		if err := canonValue(dec, &val, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, val.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return fmt.Errorf("duplicate object key %q", m.key)
			}
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(m.val)
	}
	out.WriteByte('}')
	return nil
}

func canonArray(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := canonValue(dec, out, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return err
	}
	out.WriteByte(']')
	return nil
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(out *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
