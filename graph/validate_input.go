package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
)

// compileInputSchema compiles a node's input JSON Schema once, so that the
// kernel can check every call's arguments centrally: an adapter added later
// inherits the check.
func compileInputSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("input schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Only the document itself: never fetch a $ref from the network or disk.
	c.UseLoader(noLoader{})
	if err := c.AddResource("node-input.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("node-input.json")
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema $ref %q refused: schemas are self-contained", url)
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
		// The first line names the schema's internal URL: drop it.
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, "\n"); ok {
			msg = strings.TrimSpace(rest)
		}
		msg = strings.TrimPrefix(msg, "- ")
		return &agent.InputError{Agent: n.Name, Reason: "arguments do not match the input schema: " + oneLine(msg)}
	}
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
