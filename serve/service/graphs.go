package service

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// DefaultInputSchema is the schema advertised for a graph that declares
// none: text. It is advertised, not enforced — such a graph accepts any JSON
// value, as `babel run` does.
var defaultInputSchema = json.RawMessage(`{"type":"string"}`)

// GraphInfo describes a served graph to callers.
type GraphInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the graph's declared input schema, or {"type":"string"}.
	InputSchema json.RawMessage `json:"input_schema"`
	// Declared reports whether InputSchema came from the graph (and is enforced).
	Declared bool `json:"input_schema_declared"`
	// Effects is the union of what the graph's nodes and tools declare.
	Effects []agent.Effect `json:"effects"`
	// ReadsOutside is true when any node reads from outside the process.
	ReadsOutside bool `json:"reads_outside"`
}

// ReadOnly reports whether no node declares write, egress or exec.
func (g GraphInfo) ReadOnly() bool {
	for _, e := range g.Effects {
		if e.Consequential() {
			return false
		}
	}
	return true
}

// Has reports whether any node declares e.
func (g GraphInfo) Has(e agent.Effect) bool {
	for _, x := range g.Effects {
		if x == e {
			return true
		}
	}
	return false
}

// OpenWorld reports whether the graph reaches outside the process: a node
// that reads from outside, or declares read or egress.
func (g GraphInfo) OpenWorld() bool {
	return g.ReadsOutside || g.Has(agent.EffectRead) || g.Has(agent.EffectEgress)
}

type servedGraph struct {
	g      *graph.Graph
	info   GraphInfo
	schema *jsonschema.Schema // nil: any input
}

func newServedGraph(g *graph.Graph) (*servedGraph, error) {
	sg := &servedGraph{g: g, info: GraphInfo{Name: g.Name, Description: g.Description, InputSchema: defaultInputSchema, Effects: []agent.Effect{}}}
	if len(g.InputSchema) > 0 && !bytes.Equal(bytes.TrimSpace(g.InputSchema), []byte("null")) {
		s, err := graph.CompileSchema(g.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("graph %s: input schema: %w", g.Name, err)
		}
		sg.schema, sg.info.InputSchema, sg.info.Declared = s, g.InputSchema, true
	}
	seen := map[agent.Effect]bool{}
	nodes := append(append([]*graph.Node{}, g.Nodes...), g.Tools...)
	for _, n := range nodes {
		for _, e := range n.Card.Effects {
			if !seen[e] && e != agent.EffectNone {
				seen[e] = true
				sg.info.Effects = append(sg.info.Effects, e)
			}
		}
		if n.Card.ReadsOutside {
			sg.info.ReadsOutside = true
		}
	}
	return sg, nil
}

// validate checks the input against the graph's declared schema.
func (sg *servedGraph) validate(m agent.Message) error {
	if err := m.Validate(); err != nil {
		return BadRequest(CodeInvalidInput, "input: %s", err.Error())
	}
	if sg.schema == nil {
		return nil
	}
	raw, err := m.Value()
	if err != nil {
		return BadRequest(CodeInvalidInput, "input: %s", err.Error())
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return BadRequest(CodeInvalidInput, "input is not valid JSON")
	}
	if err := sg.schema.Validate(v); err != nil {
		return BadRequest(CodeInvalidInput, "input does not match the graph's input schema: %s", graph.SchemaMismatch(err))
	}
	return nil
}
