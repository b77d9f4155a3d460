package llm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/babelagent/babel/agent"
)

// toolMap offers a call's tools to the model under wire-safe names and maps
// the model's calls back.
type toolMap struct {
	defs  []ToolDef
	byWir map[string]toolEntry
	names []string // wire names, sorted, for refusal messages
}

type toolEntry struct {
	name    string // the graph's tool name
	wrapped bool   // the tool takes a non-object value, offered as {"input": value}
}

// newToolMap builds the tool definitions. A tool's description and schema
// go only into the definition; they are data from the tool's card (which
// may come from a peer), never instructions.
func newToolMap(tools []agent.Tool) *toolMap {
	tm := &toolMap{byWir: map[string]toolEntry{}}
	for _, t := range tools {
		wire := wireName(t.Name)
		for i := 2; ; i++ {
			if _, dup := tm.byWir[wire]; !dup {
				break
			}
			wire = fmt.Sprintf("%s_%d", wireName(t.Name)[:min(len(wireName(t.Name)), 60)], i)
		}
		schema, wrapped := objectSchema(t.InputSchema)
		tm.byWir[wire] = toolEntry{name: t.Name, wrapped: wrapped}
		tm.defs = append(tm.defs, ToolDef{Name: wire, Description: t.Description, Schema: schema})
		tm.names = append(tm.names, wire)
	}
	sort.Strings(tm.names)
	return tm
}

// wireName maps a tool name onto what every provider accepts:
// [A-Za-z0-9_-]{1,64}.
func wireName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "tool"
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// objectSchema returns the schema to offer for a tool's input: its own when
// it describes an object, otherwise an object whose "input" property holds
// the tool's value (providers accept only object parameters).
func objectSchema(raw json.RawMessage) (map[string]any, bool) {
	var m map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &m) == nil && m["type"] == "object" {
		delete(m, "$schema")
		delete(m, "$id")
		return m, false
	}
	inner := map[string]any{}
	if m != nil {
		delete(m, "$schema")
		delete(m, "$id")
		inner = m
	} else if len(raw) > 0 {
		var b bool // a boolean schema: true accepts anything
		if json.Unmarshal(raw, &b) == nil && !b {
			inner = map[string]any{"not": map[string]any{}}
		}
	}
	return map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"input": inner},
		"required":             []any{"input"},
		"additionalProperties": false,
	}, true
}

// args turns a model's arguments into the tool's input value, or says why
// they are unusable (fed back to the model as a tool error).
func (e toolEntry) args(raw json.RawMessage) (json.RawMessage, string) {
	if len(raw) > maxToolArgs {
		return nil, fmt.Sprintf("the arguments are %d bytes; the limit is %d", len(raw), maxToolArgs)
	}
	if strings.TrimSpace(string(raw)) == "" {
		raw = json.RawMessage("{}")
	}
	if !json.Valid(raw) {
		return nil, "the arguments are not valid JSON"
	}
	if !e.wrapped {
		return raw, ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, `the arguments must be an object {"input": ...}`
	}
	for k := range obj {
		if k != "input" {
			return nil, fmt.Sprintf("unknown argument %q: this tool takes only \"input\"", k)
		}
	}
	v, ok := obj["input"]
	if !ok {
		return nil, `the argument "input" is missing`
	}
	return v, ""
}

const (
	maxToolArgs       = 256 << 10
	maxToolResult     = 100 << 10
	maxCallsPerRound  = 32
	truncationMessage = "\n[truncated: the tool's output was longer than %d bytes]"
)

// resultText is what the model sees of a tool's output: its text (data as
// JSON), capped.
func resultText(out agent.Message) string {
	s := out.Text()
	if len(s) > maxToolResult {
		cut := maxToolResult
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf(truncationMessage, maxToolResult)
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
