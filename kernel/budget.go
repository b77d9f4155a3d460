package kernel

import (
	"fmt"
	"sync/atomic"
)

// Budget is what a run may still spend. Sub-runs and an LLM's tool calls
// draw from their parent's budget. Safe for concurrent use.
type Budget struct {
	MaxSteps  int64
	MaxTokens int64
	// MaxCostMicros caps model spend, in millionths of a US dollar, priced
	// by Prices; zero means no cost cap.
	MaxCostMicros int64
	Prices        Prices
	// MaxEgressBytes caps the bytes a run exchanges with the outside
	// through its adapters; zero means no cap.
	MaxEgressBytes int64
	egress         atomic.Int64
	steps          atomic.Int64
	tokens         atomic.Int64
	cost           atomic.Int64
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Prices is the operator's price table by model name; "*" prices a model
// the table does not name.
type Prices map[string]Price

// DefaultPrices is a conservative table: a model it does not know is priced
// as an expensive one, so a cost budget errs on the side of stopping.
func DefaultPrices() Prices {
	return Prices{
		"gpt-4o-mini":       {InputPerMTok: 0.15, OutputPerMTok: 0.60},
		"gpt-4o":            {InputPerMTok: 2.50, OutputPerMTok: 10},
		"claude-sonnet-4-5": {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-haiku-4-5":  {InputPerMTok: 1, OutputPerMTok: 5},
		"*":                 {InputPerMTok: 15, OutputPerMTok: 75},
	}
}

// micros prices a response in millionths of a dollar (rounded up).
func (p Prices) micros(model string, in, out int64) int64 {
	pr, ok := p[model]
	if !ok {
		pr = p["*"]
	}
	return int64(float64(in)*pr.InputPerMTok + float64(out)*pr.OutputPerMTok + 0.999999)
}

// Usage charges a model response's tokens and its cost.
func (b *Budget) Usage(model string, in, out int64) error {
	if b == nil {
		return nil
	}
	if err := b.Tokens(in + out); err != nil {
		return err
	}
	if b.Prices == nil {
		return nil
	}
	if c := b.cost.Add(b.Prices.micros(model, in, out)); b.MaxCostMicros > 0 && c > b.MaxCostMicros {
		return &LimitError{Limit: fmt.Sprintf("cost (max $%.2f)", float64(b.MaxCostMicros)/1e6)}
	}
	return nil
}

// Egress charges n bytes of traffic with the outside.
func (b *Budget) Egress(n int64) error {
	if b == nil {
		return nil
	}
	if t := b.egress.Add(n); b.MaxEgressBytes > 0 && t > b.MaxEgressBytes {
		return &LimitError{Limit: "egress bytes", Max: b.MaxEgressBytes}
	}
	return nil
}

// CostMicros is the model spend so far, in millionths of a dollar.
func (b *Budget) CostMicros() int64 {
	if b == nil {
		return 0
	}
	return b.cost.Load()
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

// TokensLeft reports whether any token and cost budget remains.
func (b *Budget) TokensLeft() bool {
	if b == nil {
		return true
	}
	if b.MaxCostMicros > 0 && b.cost.Load() >= b.MaxCostMicros {
		return false
	}
	return b.MaxTokens <= 0 || b.tokens.Load() < b.MaxTokens
}

// Used returns the steps and tokens spent so far.
func (b *Budget) Used() (steps, tokens int64) {
	if b == nil {
		return 0, 0
	}
	return b.steps.Load(), b.tokens.Load()
}
