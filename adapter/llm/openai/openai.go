// Package openai is the llm provider for OpenAI chat completions and every
// server that speaks them (Ollama, vLLM, llama.cpp, gateways), built on
// github.com/openai/openai-go/v3. It lives apart from package llm so that
// only binaries registering it link the SDK.
//
// It must never build an SDK client from the environment (OPENAI_API_KEY,
// OPENAI_BASE_URL, OPENAI_CUSTOM_HEADERS and the like are ignored), send a
// request through anything but the agent's egress-guarded client, let the
// SDK retry on its own (retries are the node's retry: policy), or keep the
// API key beyond the call that uses it.
package openai

import (
	"context"
	"errors"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/babelagent/babel/adapter/llm"
)

// Provider returns the "openai" provider: https://api.openai.com/v1, key
// from the secret OPENAI_API_KEY unless api_key_secret names another. With
// a base_url (vLLM, llama.cpp) the key is optional.
func Provider() llm.Provider {
	return llm.Provider{
		Name: "openai", DefaultBaseURL: "https://api.openai.com/v1", KeySecret: "OPENAI_API_KEY",
		New: func(baseURL string, hc *http.Client) (llm.Model, error) {
			return newModel("openai", baseURL, hc, true), nil
		},
	}
}

// Ollama returns the "ollama" provider: a local Ollama server's
// OpenAI-compatible API at http://127.0.0.1:11434/v1, no key. The address
// is loopback, so the node must opt it in: allow_private: ["127.0.0.1:11434"].
func Ollama() llm.Provider {
	return llm.Provider{
		Name: "ollama", DefaultBaseURL: "http://127.0.0.1:11434/v1", KeyOptional: true,
		New: func(baseURL string, hc *http.Client) (llm.Model, error) {
			return newModel("ollama", baseURL, hc, false), nil
		},
	}
}

var _ llm.Model = (*model)(nil)

type model struct {
	svc  sdk.ChatCompletionService
	peer string
	// completionTokens sends max_completion_tokens (OpenAI's current
	// field, required by its reasoning models) rather than max_tokens
	// (what most compatible servers read).
	completionTokens bool
}

func newModel(name, baseURL string, hc *http.Client, completionTokens bool) *model {
	host := baseURL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	// The service alone, not sdk.NewClient: a client reads OPENAI_*
	// variables from the environment.
	svc := sdk.NewChatCompletionService(
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	)
	return &model{svc: svc, peer: name + " " + host, completionTokens: completionTokens}
}

func (m *model) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params := m.params(req)
	var opts []option.RequestOption
	if !req.APIKey.IsZero() {
		opts = append(opts, option.WithAPIKey(req.APIKey.Reveal()))
	}
	if req.Stream {
		return m.stream(ctx, params, opts)
	}
	resp, err := m.svc.New(ctx, params, opts...)
	if err != nil {
		return nil, m.fail(ctx, err)
	}
	if len(resp.Choices) == 0 {
		return nil, llm.APIError(m.peer, http.StatusOK, "no_choices")
	}
	ch := resp.Choices[0]
	out := &llm.Response{
		Text: ch.Message.Content, StopReason: ch.FinishReason,
		Usage: llm.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens},
	}
	if out.Text == "" && ch.Message.Refusal != "" {
		out.Text = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: []byte(tc.Function.Arguments)})
	}
	return out, nil
}

func (m *model) stream(ctx context.Context, params sdk.ChatCompletionNewParams, opts []option.RequestOption) (*llm.Response, error) {
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	s := m.svc.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var acc accumulator
	for s.Next() {
		acc.add(s.Current())
	}
	if err := s.Err(); err != nil {
		return nil, m.fail(ctx, err)
	}
	return acc.response(), nil
}

// accumulator rebuilds a response from its stream: content deltas are
// appended, tool calls assembled by index (the first delta of each carries
// its id and name, later ones fragments of its arguments), and usage taken
// from the final chunk.
type accumulator struct {
	text  strings.Builder
	calls []*partialCall
	usage llm.Usage
	stop  string
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(c sdk.ChatCompletionChunk) {
	if c.JSON.Usage.Valid() && (c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0) {
		a.usage = llm.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.text.WriteString(ch.Delta.Content)
		if ch.Delta.Content == "" && ch.Delta.Refusal != "" {
			a.text.WriteString(ch.Delta.Refusal)
		}
		if ch.FinishReason != "" {
			a.stop = ch.FinishReason
		}
		for _, d := range ch.Delta.ToolCalls {
			if d.Index < 0 || d.Index > 127 {
				continue
			}
			for int(d.Index) >= len(a.calls) {
				a.calls = append(a.calls, &partialCall{})
			}
			p := a.calls[d.Index]
			if d.ID != "" {
				p.id = d.ID
			}
			if d.Function.Name != "" {
				p.name = d.Function.Name
			}
			p.args.WriteString(d.Function.Arguments)
		}
	}
}

func (a *accumulator) response() *llm.Response {
	out := &llm.Response{Text: a.text.String(), Usage: a.usage, StopReason: a.stop}
	for _, p := range a.calls {
		if p.name == "" && p.id == "" {
			continue
		}
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: p.id, Name: p.name, Args: []byte(p.args.String())})
	}
	return out
}

// params translates the neutral conversation into chat-completions messages:
// the system text as the one system message, tool results as tool
// messages answering their call ids.
func (m *model) params(req *llm.Request) sdk.ChatCompletionNewParams {
	p := sdk.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleUser:
			p.Messages = append(p.Messages, sdk.UserMessage(msg.Text))
		case llm.RoleAssistant:
			a := sdk.ChatCompletionAssistantMessageParam{}
			if msg.Text != "" {
				a.Content.OfString = sdk.String(msg.Text)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Args)},
					},
				})
			}
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case llm.RoleTool:
			for _, r := range msg.ToolResults {
				content := r.Content
				if r.IsError && !strings.HasPrefix(content, "error") && !strings.HasPrefix(content, "refused") {
					content = "error: " + content
				}
				p.Messages = append(p.Messages, sdk.ToolMessage(content, r.CallID))
			}
		}
	}
	for _, t := range req.Tools {
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Schema)}
		if t.Description != "" {
			def.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(def))
	}
	if m.completionTokens {
		p.MaxCompletionTokens = sdk.Int(req.MaxTokens)
	} else {
		p.MaxTokens = sdk.Int(req.MaxTokens)
	}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	return p
}

// fail maps an SDK error: an error response becomes an *agent.PeerError
// without the provider's message (the SDK's error keeps the request, key
// header included, so it is never wrapped); anything else is a transport
// failure.
func (m *model) fail(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		code := apiErr.Code
		if code == "" {
			code = apiErr.Type
		}
		return llm.APIError(m.peer, apiErr.StatusCode, code)
	}
	return llm.TransportError(ctx, m.peer, err)
}
