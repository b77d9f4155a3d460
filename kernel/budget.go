package kernel

import "sync/atomic"

// Budget is what a run may still spend. Sub-runs and an LLM's tool calls
// draw from their parent's budget. Safe for concurrent use.
type Budget struct {
	MaxSteps  int64
	MaxTokens int64
	steps     atomic.Int64
	tokens    atomic.Int64
}

// NewBudget returns a budget of maxSteps steps and maxTokens tokens.
func NewBudget(maxSteps, maxTokens int64) *Budget {
	return &Budget{MaxSteps: maxSteps, MaxTokens: maxTokens}
}

// Step takes one step, or fails once the budget is spent.
func (b *Budget) Step() error {
	if b == nil {
		return nil
	}
	if n := b.steps.Add(1); b.MaxSteps > 0 && n > b.MaxSteps {
		b.steps.Add(-1)
		return &LimitError{Limit: "steps", Max: b.MaxSteps}
	}
	return nil
}

// Tokens charges n tokens; it fails once the total passes the budget.
func (b *Budget) Tokens(n int64) error {
	if b == nil {
		return nil
	}
	if t := b.tokens.Add(n); b.MaxTokens > 0 && t > b.MaxTokens {
		return &LimitError{Limit: "tokens", Max: b.MaxTokens}
	}
	return nil
}

// TokensLeft reports whether any token budget remains.
func (b *Budget) TokensLeft() bool {
	return b == nil || b.MaxTokens <= 0 || b.tokens.Load() < b.MaxTokens
}

// Used returns the steps and tokens spent so far.
func (b *Budget) Used() (steps, tokens int64) {
	if b == nil {
		return 0, 0
	}
	return b.steps.Load(), b.tokens.Load()
}
