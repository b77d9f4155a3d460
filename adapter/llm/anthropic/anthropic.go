// Package anthropic is the llm provider for Anthropic's Messages API, built
// on github.com/anthropics/anthropic-sdk-go/v2. It lives apart from package
// llm so that only binaries registering it link the SDK.
//
// It must never build an SDK client from the environment or a profile
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_PROFILE and the
// credential files they point to are ignored), send a request through
// anything but the agent's egress-guarded client, let the SDK retry on its
// own, emit the SDK's OpenTelemetry spans or trace headers (they can carry
// prompt content and leak trace ids to the provider), or keep the API key
// beyond the call that uses it.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/babelagent/babel/adapter/llm"
)

// Provider returns the "anthropic" provider: https://api.anthropic.com, key
// from the secret ANTHROPIC_API_KEY unless api_key_secret names another.
// A base_url names the server root (the API's paths start with /v1/).
func Provider() llm.Provider {
	return llm.Provider{
		Name: "anthropic", DefaultBaseURL: "https://api.anthropic.com", KeySecret: "ANTHROPIC_API_KEY",
		New: func(baseURL string, hc *http.Client) (llm.Model, error) { return newModel(baseURL, hc), nil },
	}
}

var _ llm.Model = (*model)(nil)

type model struct {
	svc  sdk.MessageService
	peer string
}

func newModel(baseURL string, hc *http.Client) *model {
	host := baseURL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	// The service alone, not sdk.NewClient: a client loads credentials from
	// the environment and profile files.
	svc := sdk.NewMessageService(
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithoutOpenTelemetry(),
		option.WithOpenTelemetryPropagation(false),
	)
	return &model{svc: svc, peer: "anthropic " + host}
}

func (m *model) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params := params(req)
	var opts []option.RequestOption
	if !req.APIKey.IsZero() {
		opts = append(opts, option.WithAPIKey(req.APIKey.Reveal()))
	}
	if req.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	var msg sdk.Message
	if req.Stream {
		s := m.svc.NewStreaming(ctx, params, opts...)
		defer s.Close()
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				return nil, llm.APIError(m.peer, http.StatusOK, "malformed_stream")
			}
		}
		if err := s.Err(); err != nil {
			return nil, m.fail(ctx, err)
		}
	} else {
		resp, err := m.svc.New(ctx, params, opts...)
		if err != nil {
			return nil, m.fail(ctx, err)
		}
		msg = *resp
	}
	return response(&msg), nil
}

// response reads the model's turn: its text blocks, its tool_use blocks, and
// every input and output token it reports (cache reads and writes count as
// input).
func response(msg *sdk.Message) *llm.Response {
	u := msg.Usage
	out := &llm.Response{
		StopReason: string(msg.StopReason),
		Usage: llm.Usage{
			InputTokens:  u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
			OutputTokens: u.OutputTokens,
		},
	}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := json.RawMessage(b.Input)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	out.Text = text.String()
	return out
}

// params translates the neutral conversation into Messages: the system text
// as the system parameter, tool calls as tool_use blocks, tool results as
// tool_result blocks in the user turn that follows.
func params(req *llm.Request) sdk.MessageNewParams {
	p := sdk.MessageNewParams{Model: req.Model, MaxTokens: req.MaxTokens}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleUser:
			p.Messages = append(p.Messages, sdk.NewUserMessage(sdk.NewTextBlock(msg.Text)))
		case llm.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if msg.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Text))
			}
			for _, tc := range msg.ToolCalls {
				var input any = json.RawMessage(tc.Args)
				if !json.Valid(tc.Args) {
					input = map[string]any{}
				}
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		case llm.RoleTool:
			blocks := make([]sdk.ContentBlockParamUnion, 0, len(msg.ToolResults))
			for _, r := range msg.ToolResults {
				blocks = append(blocks, sdk.NewToolResultBlock(r.CallID, r.Content, r.IsError))
			}
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		}
	}
	for _, t := range req.Tools {
		schema := sdk.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, v := range t.Schema {
			switch k {
			case "type":
			case "properties":
				schema.Properties = v
			case "required":
				schema.Required = toStrings(v)
			default:
				schema.ExtraFields[k] = v
			}
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return p
}

func toStrings(v any) []string {
	var out []string
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// fail maps an SDK error: an error response becomes an *agent.PeerError
// without the provider's message (the SDK's error keeps the request, key
// header included, so it is never wrapped); anything else is a transport
// failure.
func (m *model) fail(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		status, typ := apiErr.StatusCode, string(apiErr.Type())
		if status < 400 {
			// An error event inside a stream that began with 200: take the
			// status its type stands for.
			status = streamStatus(typ)
		}
		return llm.APIError(m.peer, status, typ)
	}
	return llm.TransportError(ctx, m.peer, err)
}

// streamStatus is the HTTP status an error type has outside a stream.
func streamStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "api_error":
		return 500
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	}
	return http.StatusBadGateway
}
