// Package llm makes a chat model an agent: the input message fills a prompt
// template, the model answers, and when the node lists tools the model may
// call them — each call made through the kernel (agent.ToolsFrom), never by
// running a tool itself — for at most max_steps rounds.
//
// The wire protocols live in sub-packages, one SDK each, so a binary links
// only the providers it registers: llm/openai (OpenAI and any
// OpenAI-compatible server: Ollama, vLLM, llama.cpp) and llm/anthropic
// (Anthropic Messages). This package holds what they share: the
// configuration, the tool loop, token accounting and the provider-neutral
// conversation a Model speaks.
//
// In a topology:
//
//	agent: {llm: {provider: openai, model: gpt-4o-mini, prompt: "Summarize: {{.input}}",
//	              system: "You are terse.", max_tokens: 512, temperature: 0}}
//	secrets: [OPENAI_API_KEY]
//
// or in short: agent: openai:gpt-4o-mini, anthropic:claude-sonnet-4-5 or
// ollama:llama3.2 (Ollama on 127.0.0.1:11434, which the node must opt in
// with allow_private: ["127.0.0.1:11434"]).
//
// Every request goes through the egress guard built from the node's
// declarations; the API key is a secret the node declares, read from
// agent.SecretsFrom at call time. After each model response the usage is
// charged with agent.ChargeUsage (tokens, and cost from the operator's price table), and the run stops when its budget is
// spent.
//
// This package must never: put a tool's output or description, or anything
// but the configured system text, into the system prompt (tool results go
// only in tool-result fields, tool descriptions only in tool definitions);
// run a tool but through agent.Tools; run a tool the model named but the
// node was not given; read an API key from the environment or keep it past
// a call; or put a key or a provider's error body into an error, a card or
// an output.
package llm
