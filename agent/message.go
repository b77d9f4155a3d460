package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// PartKind names the shape of a Part. The shapes are those of A2A and MCP
// (text, structured data, file by bytes or by reference), so adapters
// translate without loss.
type PartKind string

const (
	PartText PartKind = "text"
	PartData PartKind = "data"
	PartFile PartKind = "file"
)

// Part is one piece of a Message.
type Part struct {
	Kind PartKind `json:"kind"`
	// Text is set for text parts.
	Text string `json:"text,omitempty"`
	// Data is set for data parts: any JSON value.
	Data json.RawMessage `json:"data,omitempty"`
	// File is set for file parts.
	File *File `json:"file,omitempty"`
	// Metadata is carried as is.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// File is a file carried inline (Bytes) or by reference (URI).
type File struct {
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	URI       string `json:"uri,omitempty"`
	Bytes     []byte `json:"bytes,omitempty"`
}

// Message is what flows between agents: parts, metadata and provenance labels.
//
// A Message is a value; treat its slices and maps as read-only once sent.
type Message struct {
	Parts    []Part         `json:"parts"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Labels   Labels         `json:"labels"`
}

// Text returns a message of one text part.
func Text(s string) Message { return Message{Parts: []Part{{Kind: PartText, Text: s}}} }

// JSON returns a message of one data part holding raw, which must be valid JSON.
func JSON(raw json.RawMessage) Message {
	return Message{Parts: []Part{{Kind: PartData, Data: raw}}}
}

// Data returns a message of one data part holding v marshalled as JSON.
func Data(v any) (Message, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("encode data part: %w", err)
	}
	return JSON(b), nil
}

// FromValue builds a message from a decoded JSON value or raw JSON: a string
// becomes a text part, anything else a data part.
func FromJSON(raw json.RawMessage) Message {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return Text(s)
		}
	}
	return JSON(raw)
}

// WithLabels returns m carrying the union of its labels and ls.
func (m Message) WithLabels(ls Labels) Message { m.Labels = m.Labels.Union(ls); return m }

// Text returns the concatenation of the message's text parts; a message of
// one data part holding a JSON string gives that string; other data parts
// are rendered as compact JSON.
func (m Message) Text() string {
	if len(m.Parts) == 1 {
		return m.Parts[0].text()
	}
	var b strings.Builder
	for i, p := range m.Parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.text())
	}
	return b.String()
}

func (p Part) text() string {
	switch p.Kind {
	case PartText:
		return p.Text
	case PartData:
		var s string
		if json.Unmarshal(p.Data, &s) == nil {
			return s
		}
		return string(p.Data)
	case PartFile:
		if p.File != nil {
			if p.File.URI != "" {
				return p.File.URI
			}
			return string(p.File.Bytes)
		}
	}
	return ""
}

// ErrNoValue is returned by Value for a message with no parts.
var ErrNoValue = errors.New("message has no parts")

// Value returns the message as one JSON value: a single data part is
// returned as is, text becomes a JSON string, and several parts become an
// array of their values.
func (m Message) Value() (json.RawMessage, error) {
	switch len(m.Parts) {
	case 0:
		return nil, ErrNoValue
	case 1:
		return m.Parts[0].value()
	}
	out := []byte{'['}
	for i, p := range m.Parts {
		if i > 0 {
			out = append(out, ',')
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return append(out, ']'), nil
}

// AppendValue appends m's value (Value) to dst. A text part that needs
// no escaping is appended without going through encoding/json.
func AppendValue(dst []byte, m Message) ([]byte, error) {
	if len(m.Parts) == 1 && m.Parts[0].Kind == PartText && plainJSONString(m.Parts[0].Text) {
		dst = append(dst, '"')
		dst = append(dst, m.Parts[0].Text...)
		return append(dst, '"'), nil
	}
	v, err := m.Value()
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

// plainJSONString reports whether s, quoted, is the JSON encoding/json
// would write for it: printable ASCII with nothing to escape.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func (p Part) value() (json.RawMessage, error) {
	switch p.Kind {
	case PartText:
		return json.Marshal(p.Text)
	case PartData:
		if len(p.Data) == 0 {
			return json.RawMessage("null"), nil
		}
		return p.Data, nil
	case PartFile:
		return json.Marshal(p.File)
	}
	return nil, fmt.Errorf("unknown part kind %q", p.Kind)
}

// Any decodes the message's value into a generic Go value (string,
// float64, map[string]any, []any, bool or nil).
func (m Message) Any() (any, error) {
	raw, err := m.Value()
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode message value: %w", err)
	}
	return v, nil
}

// Validate checks that the message is well formed: known part kinds, each
// with its payload, and valid JSON in data parts.
func (m Message) Validate() error {
	for i, p := range m.Parts {
		switch p.Kind {
		case PartText:
		case PartData:
			if !json.Valid(p.Data) {
				return fmt.Errorf("part %d: data is not valid JSON", i)
			}
		case PartFile:
			if p.File == nil || (p.File.URI == "" && p.File.Bytes == nil) {
				return fmt.Errorf("part %d: file part needs a uri or bytes", i)
			}
		default:
			return fmt.Errorf("part %d: unknown kind %q (want text, data or file)", i, p.Kind)
		}
	}
	return nil
}
