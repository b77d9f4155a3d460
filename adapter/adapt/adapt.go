// Package adapt turns what a Go program has in hand into an agent, choosing
// the adapter from the value: an agent.Agent as is; a function of one of a
// few plain shapes; an https (or http) URL as an HTTP endpoint, or as an
// OpenAPI operation when Options.Operation names one; a model as
// "openai:MODEL", "anthropic:MODEL" or "ollama:MODEL"; and any short form a
// caller registers in Options.Prefixes ("mcp+stdio:", "mcp+https:",
// "a2a+https:" are added by the catalog from their own packages).
//
// Functions are not wrapped by reflection: a typed function must be made an
// agent with agent.Func[In, Out], which decodes its input strictly against
// In's schema (an unknown field such as "admin": true is an error naming
// it). A reflection wrapper could not give that guarantee as cheaply, so
// Adapt accepts only the shapes that need no decoding choice and names
// agent.Func for the rest.
//
// Importing this package links both LLM provider SDKs (llm/openai and
// llm/anthropic); a program that must stay small uses the adapter packages
// directly.
//
// Adapt never makes a network connection: an agent built here connects only
// when it runs, through the egress guard, and an OpenAPI document is read
// when Adapt builds its agent, as openapi.New does.
package adapt

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/adapter/llm"
	"github.com/babelagent/babel/adapter/llm/anthropic"
	"github.com/babelagent/babel/adapter/llm/openai"
	"github.com/babelagent/babel/adapter/openapi"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// Constructor builds an agent from the rest of a short form: for
// "mcp+stdio:npx server" it gets "npx server".
type Constructor func(target string, opts *Options) (agent.Agent, error)

// Options guide Adapt. Nil means the defaults.
type Options struct {
	// Name names a function agent (default "fn").
	Name string
	// Func describes a function agent: its description, effects, secrets.
	Func *agent.FuncOptions

	// Operation makes an https URL an OpenAPI document, and this the
	// operationId to call; Digest pins the document (required for a
	// document fetched over the network).
	Operation string
	Digest    string
	// HTTP configures a URL agent: method, headers, auth. Its URL is the
	// one given to Adapt.
	HTTP *httpadapter.Config
	// LLM configures a model agent: prompt, system, key secret, limits.
	// Its provider and model come from the string given to Adapt.
	LLM *llm.Config

	// Egress is the template of the agent's guarded client: its
	// Allowlist (default: the URL's own host), AllowPrivate, timeouts,
	// caps, resolver, TLS roots.
	Egress *egress.Options
	// Providers are the LLM providers; nil means openai, ollama and
	// anthropic.
	Providers []llm.Provider
	// Prefixes add short forms, by the text before the first ':'. They are
	// consulted first, so a caller may also replace a built-in one.
	Prefixes map[string]Constructor
}

// Adapt returns an agent for x (see the package documentation).
func Adapt(x any, opts *Options) (agent.Agent, error) {
	if opts == nil {
		opts = &Options{}
	}
	switch v := x.(type) {
	case nil:
		return nil, errors.New("adapt: nothing to adapt (nil)")
	case agent.Agent:
		return v, nil
	case string:
		return adaptString(v, opts)
	case func(context.Context, agent.Message) (agent.Message, error):
		return &messageFunc{fn: v, card: funcCard(opts)}, nil
	case func(context.Context, string) (string, error):
		return agent.Func(name(opts), v, opts.Func)
	case func(context.Context, map[string]any) (map[string]any, error):
		return agent.Func(name(opts), v, opts.Func)
	case func(context.Context, map[string]any) (string, error):
		return agent.Func(name(opts), v, opts.Func)
	case func(context.Context, string) (map[string]any, error):
		return agent.Func(name(opts), v, opts.Func)
	}
	if t := reflect.TypeOf(x); t.Kind() == reflect.Func {
		// A named function type of a supported shape (type Handler func(...)).
		for _, st := range shapes() {
			if t != st && t.ConvertibleTo(st) {
				return Adapt(reflect.ValueOf(x).Convert(st).Interface(), opts)
			}
		}
		return nil, fmt.Errorf("adapt: a %s is not adapted by reflection: wrap it with agent.Func[In, Out](name, fn, opts), "+
			"which decodes its input strictly against In (Adapt takes func(context.Context, T) (U, error) only for T, U of string, map[string]any or agent.Message)", t)
	}
	return nil, fmt.Errorf("adapt: cannot make an agent of a %T (want an agent.Agent, a function, a URL or a short form such as openai:MODEL)", x)
}

// shapes are the function types Adapt takes without agent.Func.
func shapes() []reflect.Type {
	return []reflect.Type{
		reflect.TypeFor[func(context.Context, agent.Message) (agent.Message, error)](),
		reflect.TypeFor[func(context.Context, string) (string, error)](),
		reflect.TypeFor[func(context.Context, map[string]any) (map[string]any, error)](),
		reflect.TypeFor[func(context.Context, map[string]any) (string, error)](),
		reflect.TypeFor[func(context.Context, string) (map[string]any, error)](),
	}
}

func adaptString(s string, opts *Options) (agent.Agent, error) {
	s = strings.TrimSpace(s)
	prefix, rest, ok := strings.Cut(s, ":")
	if !ok || prefix == "" {
		return nil, fmt.Errorf("adapt: %q: want a URL or a short form such as openai:MODEL (known: %s)", s, strings.Join(known(opts), ", "))
	}
	if c, ok := opts.Prefixes[prefix]; ok && c != nil {
		return c(rest, opts)
	}
	switch prefix {
	case "https", "http":
		if opts.Operation != "" {
			return openapi.New(&openapi.Config{Spec: s, Operation: opts.Operation, Digest: opts.Digest}, &openapi.Options{Egress: opts.Egress})
		}
		var cfg httpadapter.Config
		if opts.HTTP != nil {
			cfg = *opts.HTTP
		}
		cfg.URL = s
		return httpadapter.New(&cfg, &httpadapter.Options{Egress: opts.Egress})
	}
	providers := opts.Providers
	if providers == nil {
		providers = []llm.Provider{openai.Provider(), openai.Ollama(), anthropic.Provider()}
	}
	for _, p := range providers {
		if p.Name != prefix {
			continue
		}
		var cfg llm.Config
		if opts.LLM != nil {
			cfg = *opts.LLM
		}
		cfg.Provider, cfg.Model = p.Name, rest
		return llm.New(&cfg, &llm.Options{Providers: providers, Egress: opts.Egress})
	}
	return nil, fmt.Errorf("adapt: no adapter for %q (known: %s); a caller adds one with Options.Prefixes", prefix+":", strings.Join(known(opts), ", "))
}

// known lists the short forms Adapt understands with opts.
func known(opts *Options) []string {
	out := []string{"https:", "http:"}
	providers := opts.Providers
	if providers == nil {
		providers = []llm.Provider{openai.Provider(), openai.Ollama(), anthropic.Provider()}
	}
	var more []string
	for _, p := range providers {
		more = append(more, p.Name+":")
	}
	for k := range opts.Prefixes {
		more = append(more, k+":")
	}
	sort.Strings(more)
	return append(out, more...)
}

func name(opts *Options) string {
	if opts.Name != "" {
		return opts.Name
	}
	return "fn"
}

func funcCard(opts *Options) agent.Card {
	c := agent.Card{Name: name(opts), Kind: "fn"}
	if f := opts.Func; f != nil {
		c.Description, c.Effects, c.Secrets = f.Description, f.Effects, f.Secrets
	}
	return c
}

// messageFunc is a function of whole messages: it sees the input as is
// and its output is used as is.
type messageFunc struct {
	fn   func(context.Context, agent.Message) (agent.Message, error)
	card agent.Card
}

var _ agent.Agent = (*messageFunc)(nil)

func (m *messageFunc) Card() agent.Card { return m.card }

func (m *messageFunc) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	return m.fn(ctx, in)
}
