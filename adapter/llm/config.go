package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// Config is an LLM agent: the map under `llm:` in a topology (or under a
// provider's name, or the model of a short form such as openai:gpt-4o-mini).
type Config struct {
	// Provider names a registered provider: openai, anthropic, ollama.
	Provider string `json:"provider"`
	// Model is the provider's model name.
	Model string `json:"model"`
	// BaseURL overrides the provider's endpoint (a vLLM or llama.cpp
	// server, a gateway). It must pass the node's egress policy.
	BaseURL string `json:"base_url,omitempty"`
	// Prompt is a text/template for the user message. {{.input}} is the
	// input's text, {{.json}} its value as JSON, {{.data}} its decoded
	// value ({{.data.ticket}}). Default "{{.input}}".
	Prompt string `json:"prompt,omitempty"`
	// System is the system prompt, used as written. Nothing else is ever
	// added to it.
	System string `json:"system,omitempty"`
	// APIKeySecret names the secret holding the API key; it must be
	// declared under the node's secrets:. Default: the provider's
	// (OPENAI_API_KEY, ANTHROPIC_API_KEY).
	APIKeySecret string `json:"api_key_secret,omitempty"`
	// MaxTokens caps each model response (default 1024).
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// Temperature, 0 to 2; unset means the provider's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxSteps bounds the tool rounds: model responses that call tools
	// (default 8, at most 64). A model still calling tools after that many
	// rounds stops the node with a limit error.
	MaxSteps *int `json:"max_steps,omitempty"`
	// Stream reads the response as a stream (default true).
	Stream *bool `json:"stream,omitempty"`
	// Description is shown in the card.
	Description string `json:"description,omitempty"`
}

// Defaults and bounds of a Config.
const (
	DefaultMaxTokens = 1024
	DefaultMaxSteps  = 8
	MaxMaxSteps      = 64
	maxMaxTokens     = 1_000_000
	// DefaultRequestTimeout and DefaultResponseHeaderTimeout replace
	// egress's shorter defaults for model calls.
	DefaultRequestTimeout        = 10 * time.Minute
	DefaultResponseHeaderTimeout = 5 * time.Minute
	maxTemplate                  = 64 << 10
	maxPromptBytes               = 4 << 20
)

// Options configures the agents this package builds. Nil means no
// providers and egress's defaults.
type Options struct {
	// Providers are the providers agents may name; see llm/openai and
	// llm/anthropic.
	Providers []Provider
	// Egress is the template of every agent's guarded client: timeouts,
	// body cap, resolver, TLS roots, proxy. Its Allowlist and AllowPrivate
	// apply to agents built with New; agents built from a topology take the
	// node's declarations.
	Egress *egress.Options
}

func (o *Options) provider(name string) (Provider, error) {
	var names []string
	for _, p := range o.Providers {
		if p.Name == name {
			if p.New == nil {
				return Provider{}, fmt.Errorf("provider %s has no constructor", name)
			}
			return p, nil
		}
		names = append(names, p.Name)
	}
	if name == "" {
		return Provider{}, fmt.Errorf("provider is missing (known: %s)", strings.Join(names, ", "))
	}
	return Provider{}, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(names, ", "))
}

// checked is a validated Config with its defaults applied.
type checked struct {
	Config
	maxSteps int
	stream   bool
	prompt   *template.Template
}

func check(c Config) (*checked, error) {
	out := &checked{Config: c, maxSteps: DefaultMaxSteps, stream: true}
	switch {
	case strings.TrimSpace(c.Model) == "":
		return nil, errors.New("model is missing")
	case len(c.Model) > 256 || strings.IndexFunc(c.Model, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return nil, fmt.Errorf("model %q is not a model name", c.Model)
	case c.MaxTokens < 0 || c.MaxTokens > maxMaxTokens:
		return nil, fmt.Errorf("max_tokens %d is outside 1..%d", c.MaxTokens, maxMaxTokens)
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2):
		return nil, fmt.Errorf("temperature %v is outside 0..2", *c.Temperature)
	case c.MaxSteps != nil && (*c.MaxSteps < 0 || *c.MaxSteps > MaxMaxSteps):
		return nil, fmt.Errorf("max_steps %d is outside 0..%d", *c.MaxSteps, MaxMaxSteps)
	case len(c.System) > maxTemplate:
		return nil, fmt.Errorf("system is %d bytes; the limit is %d", len(c.System), maxTemplate)
	case len(c.Prompt) > maxTemplate:
		return nil, fmt.Errorf("prompt is %d bytes; the limit is %d", len(c.Prompt), maxTemplate)
	}
	if out.MaxTokens == 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if c.MaxSteps != nil {
		out.maxSteps = *c.MaxSteps
	}
	if c.Stream != nil {
		out.stream = *c.Stream
	}
	src := c.Prompt
	if src == "" {
		src = "{{.input}}"
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, fmt.Errorf("prompt: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	out.prompt = t
	return out, nil
}

// render fills the prompt template with the input message.
func (c *checked) render(in agent.Message) (string, error) {
	data := map[string]any{"input": in.Text(), "json": "null", "data": nil}
	if raw, err := in.Value(); err == nil {
		data["json"] = string(raw)
		var v any
		if json.Unmarshal(raw, &v) == nil {
			data["data"] = v
		}
	}
	var b cappedBuffer
	if err := c.prompt.Execute(&b, data); err != nil {
		if errors.Is(err, errPromptTooLong) {
			return "", errPromptTooLong
		}
		return "", fmt.Errorf("prompt: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	return b.String(), nil
}

var errPromptTooLong = fmt.Errorf("the prompt would exceed %d bytes", maxPromptBytes)

type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxPromptBytes {
		return 0, errPromptTooLong
	}
	return b.Buffer.Write(p)
}
