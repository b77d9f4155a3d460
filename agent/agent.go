// Package agent is Babelagent's common tongue: the Agent interface every
// adapter implements, the Message that flows between agents, and the Card in
// which an agent declares what it needs and what it does.
//
// Nothing outside package kernel may call Agent.Run: the kernel's Invoke is
// the only door through which an agent runs, so every control applies to
// every path.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Agent is anything that turns one Message into another.
//
// Run must honour ctx: return promptly once it is done. Run may be called
// concurrently from several goroutines.
type Agent interface {
	Card() Card
	Run(ctx context.Context, in Message) (Message, error)
}

// Effect is a kind of consequence an agent may have on the world.
type Effect string

const (
	EffectNone   Effect = "none"   // pure computation
	EffectRead   Effect = "read"   // reads from outside the process
	EffectWrite  Effect = "write"  // changes state outside the process
	EffectEgress Effect = "egress" // sends data out of the process
	EffectExec   Effect = "exec"   // runs code or programs
)

// ParseEffect returns the Effect named s.
func ParseEffect(s string) (Effect, error) {
	switch e := Effect(s); e {
	case EffectNone, EffectRead, EffectWrite, EffectEgress, EffectExec:
		return e, nil
	}
	return "", fmt.Errorf("unknown effect %q (want none, read, write, egress or exec)", s)
}

// Consequential reports whether the effect acts on the world (write, egress
// or exec): the leg of the Rule of Two that needs approval.
func (e Effect) Consequential() bool {
	return e == EffectWrite || e == EffectEgress || e == EffectExec
}

// Card says what an agent is, what it takes and what it needs and does.
type Card struct {
	// Name identifies the agent (for example "builtin:trim" or an MCP tool name).
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Kind is the adapter family: fn, builtin, http, openapi, mcp, a2a, llm, process, wasm.
	Kind string `json:"kind"`
	// InputSchema and OutputSchema are JSON Schemas; nil means any value.
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Secrets lists the names of the secrets the agent needs.
	Secrets []string `json:"secrets,omitempty"`
	// Egress lists the hosts the agent connects to ("api.example.com", "*.example.com").
	Egress []string `json:"egress,omitempty"`
	// Effects lists what the agent does; empty means none.
	Effects []Effect `json:"effects,omitempty"`
	// ReadsOutside is true for adapters whose output comes from outside the
	// process (HTTP, MCP, A2A, LLM...): their output is labelled untrusted
	// unless the node is declared trusted.
	ReadsOutside bool `json:"reads_outside,omitempty"`
}

// Has reports whether the card declares effect e.
func (c Card) Has(e Effect) bool { return slices.Contains(c.Effects, e) }

// Consequential reports whether the card declares write, egress or exec.
func (c Card) Consequential() bool {
	return slices.ContainsFunc(c.Effects, Effect.Consequential)
}

// EffectList renders the effects for humans ("none" when empty).
func (c Card) EffectList() string {
	if len(c.Effects) == 0 {
		return string(EffectNone)
	}
	s := make([]string, len(c.Effects))
	for i, e := range c.Effects {
		s[i] = string(e)
	}
	return strings.Join(s, ",")
}
