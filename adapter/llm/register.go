package llm

import (
	"fmt"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// Register adds the kind "llm" and one kind per provider in opts to r:
//
//	agent: {llm: {provider: openai, model: gpt-4o-mini, prompt: "Summarize: {{.input}}"}}
//	agent: openai:gpt-4o-mini          # with: {...} adds settings
//	agent: {anthropic: {model: claude-sonnet-4-5, max_tokens: 2048}}
//	agent: ollama:llama3.2             # allow_private: ["127.0.0.1:11434"]
//
// A catalog registers the providers it links:
//
//	llm.Register(r, &llm.Options{Providers: []llm.Provider{openai.Provider(), openai.Ollama(), anthropic.Provider()}})
func Register(r *graph.Registry, opts *Options) {
	if opts == nil {
		opts = &Options{}
	}
	r.Register("llm", func(ref graph.Ref) (agent.Agent, error) { return FromRef(ref, opts) })
	for _, p := range opts.Providers {
		r.Register(p.Name, func(ref graph.Ref) (agent.Agent, error) { return FromRef(ref, opts) })
	}
}

// FromRef builds the agent a topology node refers to. For a provider's own
// kind (openai:MODEL, {openai: {...}}) the provider is the kind and a short
// form's target is the model.
func FromRef(ref graph.Ref, opts *Options) (agent.Agent, error) {
	if opts == nil {
		opts = &Options{}
	}
	var cfg Config
	if err := httpadapter.DecodeConfig(ref.Config, &cfg); err != nil {
		return nil, err
	}
	if ref.Kind != "llm" {
		if cfg.Provider != "" && cfg.Provider != ref.Kind {
			return nil, fmt.Errorf("provider %q contradicts the kind %q", cfg.Provider, ref.Kind)
		}
		cfg.Provider = ref.Kind
	}
	if ref.Target != "" {
		if ref.Kind == "llm" {
			return nil, fmt.Errorf("write llm settings as a map ({llm: {provider: ..., model: ...}}) or use a provider's short form such as openai:MODEL")
		}
		if cfg.Model != "" && cfg.Model != ref.Target {
			return nil, fmt.Errorf("the model is given twice (%s and model: %s)", ref.Target, cfg.Model)
		}
		cfg.Model = ref.Target
	}
	return build(cfg, opts, ref.Node)
}
