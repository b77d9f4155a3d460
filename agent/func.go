package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/google/jsonschema-go/jsonschema"
)

// FuncOptions configures a function agent. Nil means the defaults.
type FuncOptions struct {
	Description string
	// Effects the function has; none by default.
	Effects []Effect
	// Secrets the function reads with SecretsFrom.
	Secrets []string
}

// Func makes a typed Go function an Agent.
//
// The input message's value is decoded strictly into In: a field In does
// not declare (say "admin": true) is an error that names it, never silently
// dropped or bound, and the value must satisfy the JSON Schema derived from
// In. Out becomes a text part when it is a string, a data part otherwise.
func Func[In, Out any](name string, fn func(context.Context, In) (Out, error), opts *FuncOptions) (Agent, error) {
	if opts == nil {
		opts = &FuncOptions{}
	}
	in, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("func %s: input schema: %w", name, err)
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("func %s: input schema: %w", name, err)
	}
	inRaw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("func %s: input schema: %w", name, err)
	}
	var outRaw json.RawMessage
	if out, err := jsonschema.For[Out](&jsonschema.ForOptions{IgnoreInvalidTypes: true}); err == nil {
		outRaw, _ = json.Marshal(out)
	}
	return &funcAgent[In, Out]{
		fn:     fn,
		schema: in,
		valid:  resolved,
		card: Card{
			Name: name, Description: opts.Description, Kind: "fn",
			InputSchema: inRaw, OutputSchema: outRaw,
			Effects: opts.Effects, Secrets: opts.Secrets,
		},
	}, nil
}

// MustFunc is Func that panics on a type that has no JSON Schema; for
// package-level wiring in programs and tests.
func MustFunc[In, Out any](name string, fn func(context.Context, In) (Out, error), opts *FuncOptions) Agent {
	a, err := Func(name, fn, opts)
	if err != nil {
		panic(err)
	}
	return a
}

type funcAgent[In, Out any] struct {
	fn     func(context.Context, In) (Out, error)
	schema *jsonschema.Schema
	valid  *jsonschema.Resolved
	card   Card
}

func (f *funcAgent[In, Out]) Card() Card { return f.card }

func (f *funcAgent[In, Out]) Run(ctx context.Context, msg Message) (Message, error) {
	in, err := DecodeStrict[In](f.card.Name, f.schema, f.valid, msg)
	if err != nil {
		return Message{}, err
	}
	out, err := f.fn(ctx, in)
	if err != nil {
		return Message{}, err
	}
	if s, ok := any(out).(string); ok {
		return Text(s), nil
	}
	return Data(out)
}

// DecodeStrict decodes msg's value into T, refusing unknown fields (named in
// the error) and values that break schema.
func DecodeStrict[T any](agentName string, schema *jsonschema.Schema, resolved *jsonschema.Resolved, msg Message) (T, error) {
	var zero T
	raw, err := msg.Value()
	if err != nil {
		return zero, &InputError{Agent: agentName, Reason: err.Error()}
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return zero, &InputError{Agent: agentName, Reason: "not valid JSON: " + err.Error()}
	}
	if field := unknownField(schema, generic, ""); field != "" {
		return zero, &InputError{Agent: agentName, Field: field, Reason: "unknown field: not declared by the input type"}
	}
	if err := resolved.Validate(generic); err != nil {
		return zero, &InputError{Agent: agentName, Reason: err.Error()}
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return zero, &InputError{Agent: agentName, Reason: err.Error()}
	}
	return v, nil
}

// unknownField returns the path of the first property of v that schema s
// does not declare, where s forbids extra properties ("" if none). Keys are
// compared exactly: encoding/json's case-insensitive matching must not let
// "Admin" bind a field the schema calls "admin".
func unknownField(s *jsonschema.Schema, v any, prefix string) string {
	if s == nil {
		return ""
	}
	switch val := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		closed := s.AdditionalProperties != nil && reflect.DeepEqual(s.AdditionalProperties, &jsonschema.Schema{Not: &jsonschema.Schema{}})
		for _, k := range keys {
			sub, ok := s.Properties[k]
			if !ok {
				if closed {
					return prefix + k
				}
				sub = s.AdditionalProperties
			}
			if f := unknownField(sub, val[k], prefix+k+"."); f != "" {
				return f
			}
		}
	case []any:
		for i, e := range val {
			if f := unknownField(s.Items, e, fmt.Sprintf("%s%d.", prefix, i)); f != "" {
				return f
			}
		}
	}
	return ""
}
