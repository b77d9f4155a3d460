package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/secrets"
)

// Model is one provider's chat endpoint, speaking the provider-neutral
// conversation below. Complete must honour ctx and be safe for concurrent
// use. It returns an *agent.PeerError for a provider's error response (see
// APIError) and classifies other failures with TransportError.
type Model interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Request is one model call.
type Request struct {
	Model       string
	System      string // the configured system text; nothing else
	Messages    []Message
	Tools       []ToolDef
	MaxTokens   int64
	Temperature *float64 // nil: the provider's default
	Stream      bool
	// APIKey is the call's key; the zero Secret means none. A Model reveals
	// it only to put it on the wire.
	APIKey secrets.Secret
}

// Role is who speaks a Message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries the results of the assistant's tool calls.
	RoleTool Role = "tool"
)

// Message is one turn of the conversation.
type Message struct {
	Role        Role
	Text        string
	ToolCalls   []ToolCall   // RoleAssistant
	ToolResults []ToolResult // RoleTool
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string
	Name string
	Args json.RawMessage
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string
	Content string
	IsError bool
}

// ToolDef offers a tool to the model. Schema is a JSON Schema object (type
// object): what the provider's tool-definition field takes.
type ToolDef struct {
	Name        string
	Description string
	Schema      map[string]any
}

// Response is the model's turn.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	Usage      Usage
	StopReason string
}

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Provider makes Models for one wire protocol.
type Provider struct {
	// Name is written in `provider:` and as a short form ("openai").
	Name string
	// DefaultBaseURL is used when the configuration gives no base_url.
	DefaultBaseURL string
	// KeySecret names the API-key secret used when the configuration names
	// none (OPENAI_API_KEY); empty means no key by default.
	KeySecret string
	// KeyOptional says the provider works without a key (a local server).
	KeyOptional bool
	// New returns a Model sending requests to baseURL through hc, which is
	// the agent's egress-guarded client. It must not read the environment.
	New func(baseURL string, hc *http.Client) (Model, error)
}

var safeCode = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// APIError is the error for a provider's error response: it carries the
// status and, when it is a plain identifier, the provider's error code
// ("invalid_api_key", "rate_limit_error"), never the provider's message,
// which can quote the request or the key. It is retryable for 408, 409,
// 425, 429 and 5xx.
func APIError(peer string, status int, code string) *agent.PeerError {
	retry := status == 408 || status == 409 || status == 425 || status == 429 || status >= 500
	msg := fmt.Sprintf("model API error: HTTP %d", status)
	if t := http.StatusText(status); t != "" {
		msg += " " + t
	}
	if safeCode.MatchString(code) {
		msg += " (" + code + ")"
	}
	return agent.NewPeerError(peer, status, retry, msg, nil)
}

// TransportError classifies a failure to get a response: an egress
// refusal, a body over the cap, a cancelled context, or a retryable
// network failure (see http.RequestError).
func TransportError(ctx context.Context, peer string, err error) error {
	return httpadapter.RequestError(ctx, peer, err)
}
