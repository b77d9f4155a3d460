package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
)

// CompileSchema compiles a JSON Schema document (draft 2020-12 unless it
// says otherwise) on its own: a $ref that leaves the document is refused,
// never fetched from disk or the network. A node's input schema is
// compiled once, so that the kernel can check every call's arguments
// centrally: an adapter added later inherits the check.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	// The .invalid domain can never be fetched, and nothing is fetched anyway.
	const url = "https://schema.invalid/input.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema $ref %q refused: schemas must be self-contained", url)
}

// SchemaMismatch renders what Validate of a schema from CompileSchema
// returned, for a person: without its first line (which names the schema's
// internal URL), on one line, at most 500 bytes.
func SchemaMismatch(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "\n"); ok {
		msg = strings.TrimSpace(rest)
	}
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "- "), "\n", "; ")
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return msg
}

// ValidateInput checks m against the node's input schema (no schema: any
// input). The error names the failing location.
func (n *Node) ValidateInput(m agent.Message) error {
	if n.inputSchema == nil {
		return nil
	}
	raw, err := m.Value()
	if err != nil {
		return &agent.InputError{Agent: n.Name, Reason: err.Error()}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &agent.InputError{Agent: n.Name, Reason: "not valid JSON"}
	}
	if err := n.inputSchema.Validate(v); err != nil {
		return &agent.InputError{Agent: n.Name, Reason: "arguments do not match the input schema: " + SchemaMismatch(err)}
	}
	return nil
}
