package agent

import (
	"context"
	"encoding/json"
	"errors"
)

// Tool describes one agent a planning agent (an LLM) may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Tools is what a planning agent may call: other agents of its graph, each
// call made through the kernel exactly as a node call is — authorized,
// labelled, approved, audited, budgeted. An agent never calls a tool's Run
// directly.
type Tools interface {
	// List returns the tools this call may use.
	List() []Tool
	// Call runs the named tool with args (a JSON value). An unknown name is
	// refused.
	Call(ctx context.Context, name string, args json.RawMessage) (Message, error)
}

// WithTools returns ctx carrying t; the kernel sets it for nodes that
// declare tools.
func WithTools(ctx context.Context, t Tools) context.Context {
	return derive(ctx, func(c *CallContext) { c.Tools = t })
}

// ToolsFrom returns the tools of the current call (an empty set if none).
func ToolsFrom(ctx context.Context) Tools {
	if c := current(ctx); c != nil && c.Tools != nil {
		return c.Tools
	}
	return noTools{}
}

// ErrUnknownTool is returned for a tool name the call was not given.
var ErrUnknownTool = errors.New("unknown tool")

type noTools struct{}

func (noTools) List() []Tool { return nil }
func (noTools) Call(context.Context, string, json.RawMessage) (Message, error) {
	return Message{}, ErrUnknownTool
}

// Meter charges what a call consumes to its run's budget.
type Meter interface {
	// Tokens charges n model tokens; it fails once the budget is spent, and
	// the agent must then stop.
	Tokens(n int64) error
	// TokensLeft reports whether any token budget remains.
	TokensLeft() bool
}

func meter(ctx context.Context) Meter {
	if c := current(ctx); c != nil {
		return c.Meter
	}
	return nil
}

// WithMeter returns ctx carrying m.
func WithMeter(ctx context.Context, m Meter) context.Context {
	return derive(ctx, func(c *CallContext) { c.Meter = m })
}

// ChargeTokens charges n tokens to the current run (a no-op outside a run).
func ChargeTokens(ctx context.Context, n int64) error {
	if m := meter(ctx); m != nil {
		return m.Tokens(n)
	}
	return nil
}

// TokensLeft reports whether the current run may spend more tokens.
func TokensLeft(ctx context.Context) bool {
	if m := meter(ctx); m != nil {
		return m.TokensLeft()
	}
	return true
}

// UsageMeter is a Meter that also prices model usage per model (cost
// budgets from the operator's price table).
type UsageMeter interface {
	Meter
	// Usage charges one model response's tokens, priced for model.
	Usage(model string, inputTokens, outputTokens int64) error
}

// ChargeUsage charges a model response to the current run: its tokens, and
// its cost where the run has a price table. A no-op outside a run.
func ChargeUsage(ctx context.Context, model string, inputTokens, outputTokens int64) error {
	switch m := meter(ctx).(type) {
	case UsageMeter:
		return m.Usage(model, inputTokens, outputTokens)
	case Meter:
		return m.Tokens(inputTokens + outputTokens)
	}
	return nil
}

// EgressMeter is a Meter that also counts bytes sent to and received from
// outside the process (egress budgets).
type EgressMeter interface {
	Egress(bytes int64) error
}

// ChargeEgress charges n bytes of traffic with the outside to the current
// run; it fails once the run's egress budget is spent. A no-op outside a run.
func ChargeEgress(ctx context.Context, n int64) error {
	if m, ok := meter(ctx).(EgressMeter); ok && m != nil {
		return m.Egress(n)
	}
	return nil
}
