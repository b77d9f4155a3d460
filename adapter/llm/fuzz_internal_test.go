package llm

import (
	"encoding/json"
	"testing"

	"github.com/babelagent/babel/agent"
)

// FuzzToolArgs: any tool schema and any arguments a model sends give a
// tool input or a reason fed back to the model; never a panic.
func FuzzToolArgs(f *testing.F) {
	f.Add(`{"type":"object","properties":{"city":{"type":"string"}}}`, `{"city":"Paris"}`)
	f.Add(`{"type":"string"}`, `{"input":"x"}`)
	f.Add(``, `{"input":null,"other":1}`)
	f.Add(`false`, ``)
	f.Add(`[1]`, `{`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		s, wrapped := objectSchema(json.RawMessage(schema))
		if s["type"] != "object" {
			t.Fatalf("schema %q offered as %v", schema, s)
		}
		v, why := toolEntry{name: "t", wrapped: wrapped}.args(json.RawMessage(args))
		if why == "" && !json.Valid(v) {
			t.Fatalf("args %q gave invalid JSON %q", args, v)
		}
	})
}

// FuzzPrompt: any template either fails to parse with an error or renders
// any input within the size cap.
func FuzzPrompt(f *testing.F) {
	f.Add("Summarize: {{.input}}", `{"a":[1,2]}`)
	f.Add("{{.data.a}} {{.json}}", `"text"`)
	f.Add("{{range .data}}{{.}}{{end}}", `[1,2,3]`)
	f.Add("{{.missing}}", `{}`)
	f.Fuzz(func(t *testing.T, tmpl, in string) {
		c, err := check(Config{Model: "m", Prompt: tmpl})
		if err != nil {
			return
		}
		msg := agent.Text(in)
		if json.Valid([]byte(in)) {
			msg = agent.JSON([]byte(in))
		}
		out, err := c.render(msg)
		if err == nil && len(out) > maxPromptBytes {
			t.Fatalf("prompt of %d bytes", len(out))
		}
	})
}
