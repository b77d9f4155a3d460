// Package mcpserver is the MCP door of `babel serve` and `babel mcp`: every
// served graph is an MCP tool, over streamable HTTP or stdio, built with the
// official MCP Go SDK. A tool call is a run through package service — the
// same path, limits and checks as REST and A2A.
//
// Tool input schemas are objects, as MCP requires. A graph whose input
// schema is an object is called with the tool's arguments as its input; any
// other graph (including one that declares no schema, advertised as
// {"type":"string"}) takes one argument, "input", which holds its input.
//
// A tool's annotations say honestly what it may do: read-only only if no
// node declares write, egress or exec; destructive if any declares write;
// open-world if any reads outside the process or declares read or egress.
//
// This package never runs a graph outside the service, never answers a
// call without a principal, and never puts an internal error message in a
// tool result.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/serve/service"
)

// Options configures the MCP door. Nil means the defaults.
type Options struct {
	// Local is the principal of calls that carry no bearer token: the
	// process owner over stdio, or the local user of a loopback server
	// without tokens. Nil: such calls are refused.
	Local *service.Principal
	// Version is reported to clients.
	Version string
	// Logger receives the SDK's log; nil discards.
	Logger *slog.Logger
}

// outputSchema is the run shape, as structured content.
var outputSchema = json.RawMessage(`{"type":"object","required":["run_id","graph","principal","status"],"properties":{` +
	`"run_id":{"type":"string"},"graph":{"type":"string"},"principal":{"type":"string"},` +
	`"status":{"type":"string","enum":["running","awaiting_approval","succeeded","failed","cancelled","denied","limit_exceeded"]},` +
	`"output":{},"error":{"type":"string"},"error_code":{"type":"string"},"correlation_id":{"type":"string"},` +
	`"trace":{"type":"array"},"labels":{"type":"array","items":{"type":"string"}}}}`)

// New returns an MCP server whose tools are svc's graphs.
func New(svc *service.Service, opts *Options) *mcp.Server {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "babel", Title: "Babelagent", Version: o.Version},
		&mcp.ServerOptions{Logger: log, Instructions: "Each tool runs one Babelagent graph and returns the run: status, output and trace."})
	for _, name := range svc.GraphNames() {
		info, _ := svc.Graph(name)
		schema, wrapped := ToolInputSchema(info.InputSchema)
		t := &mcp.Tool{
			Name:         info.Name,
			Title:        info.Name,
			Description:  describe(info, wrapped),
			InputSchema:  schema,
			OutputSchema: outputSchema,
			Annotations:  Annotations(info),
		}
		srv.AddTool(t, (&tool{svc: svc, graph: name, wrapped: wrapped, local: o.Local}).call)
	}
	// A caller is shown only the tools it may call.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				p, known := principalOf(req.GetExtra(), o.Local)
				kept := lt.Tools[:0:0]
				for _, t := range lt.Tools {
					if known && svc.Allowed(ctx, p, t.Name) {
						kept = append(kept, t)
					}
				}
				lt.Tools = kept
			}
			return res, err
		}
	})
	return srv
}

// principalOf is the principal of a request: its bearer token's, else the
// local principal (stdio, or a loopback server without tokens).
func principalOf(extra *mcp.RequestExtra, local *service.Principal) (service.Principal, bool) {
	if extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		return service.Principal{ID: extra.TokenInfo.UserID, Kind: "token"}, true
	}
	if local != nil {
		return *local, true
	}
	return service.Principal{}, false
}

// ToolInputSchema returns the tool input schema for a graph's input schema,
// and whether it wraps the graph's input in an "input" property.
func ToolInputSchema(graphSchema json.RawMessage) (json.RawMessage, bool) {
	var probe struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(graphSchema, &probe) == nil && probe.Type == "object" {
		return graphSchema, false
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{"input":`)
	b.Write(graphSchema)
	b.WriteString(`},"required":["input"],"additionalProperties":false}`)
	return b.Bytes(), true
}

// Annotations derives a tool's hints from what its graph's nodes declare.
func Annotations(info service.GraphInfo) *mcp.ToolAnnotations {
	destructive := info.Has(agent.EffectWrite)
	open := info.OpenWorld()
	return &mcp.ToolAnnotations{
		Title:           info.Name,
		ReadOnlyHint:    info.ReadOnly(),
		DestructiveHint: &destructive,
		OpenWorldHint:   &open,
	}
}

func describe(info service.GraphInfo, wrapped bool) string {
	d := info.Description
	if d == "" {
		d = "Run the Babelagent graph " + info.Name + "."
	}
	effects := "none"
	if len(info.Effects) > 0 {
		s := make([]string, len(info.Effects))
		for i, e := range info.Effects {
			s[i] = string(e)
		}
		effects = strings.Join(s, ", ")
	}
	d += " Effects: " + effects + "."
	if wrapped {
		d += ` Pass the graph's input as "input".`
	}
	return d
}

type tool struct {
	svc     *service.Service
	graph   string
	wrapped bool
	local   *service.Principal
}

func (t *tool) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, ok := principalOf(req.Extra, t.local)
	if !ok {
		return toolError(service.CodeUnauthorized, "no principal: this call carries no bearer token", ""), nil
	}
	in, err := t.input(req.Params.Arguments)
	if err != nil {
		e := service.AsError(err)
		return toolError(e.Code, e.Message, ""), nil
	}
	v, err := t.svc.Run(ctx, p, &service.StartRequest{Graph: t.graph, Input: in})
	if v == nil {
		e := service.AsError(err)
		return toolError(e.Code, e.Message, ""), nil
	}
	if err != nil {
		return nil, err // the call was cancelled; the run with it
	}
	return Result(v), nil
}

// input turns a call's arguments into the graph's input.
func (t *tool) input(args json.RawMessage) (agent.Message, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if !t.wrapped {
		if args[0] != '{' {
			return agent.Message{}, service.BadRequest(service.CodeInvalidInput, "arguments must be a JSON object")
		}
		return agent.FromJSON(args), nil
	}
	var a map[string]json.RawMessage
	if err := json.Unmarshal(args, &a); err != nil {
		return agent.Message{}, service.BadRequest(service.CodeInvalidInput, "arguments must be a JSON object")
	}
	raw, ok := a["input"]
	if !ok {
		return agent.Message{}, service.BadRequest(service.CodeInvalidInput, `missing argument "input": the graph's input`)
	}
	if len(a) > 1 {
		for k := range a {
			if k != "input" {
				return agent.Message{}, service.BadRequest(service.CodeInvalidInput, "unknown argument %q: this tool takes only \"input\"", clip(k))
			}
		}
	}
	return agent.FromJSON(raw), nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Result renders a run as a tool result: the run shape as structured
// content, and a short text summary. A run that did not succeed is a tool
// error, so a model sees it failed.
func Result(v *service.View) *mcp.CallToolResult {
	var sum strings.Builder
	fmt.Fprintf(&sum, "run %s of %s: %s", v.RunID, v.Graph, v.Status)
	if v.Code != "" {
		fmt.Fprintf(&sum, " (%s: %s", v.Code, v.Message)
		if v.CorrelationID != "" {
			fmt.Fprintf(&sum, "; correlation id %s", v.CorrelationID)
		}
		sum.WriteString(")")
	}
	if out := v.OutputText(); out != "" {
		const max = 4000
		if len(out) > max {
			out = out[:max] + "… (truncated; the full output is in the structured content)"
		}
		sum.WriteString("\n")
		sum.WriteString(out)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: sum.String()}},
		StructuredContent: v.JSON,
		IsError:           v.Status != "succeeded",
	}
}

func toolError(code service.Code, msg, corr string) *mcp.CallToolResult {
	text := string(code) + ": " + msg
	if corr != "" {
		text += " (correlation id " + corr + ")"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// HTTPOptions configures the streamable HTTP handler.
type HTTPOptions struct {
	// Verify maps a bearer token to its principal; nil means calls carry no
	// token (a loopback server without tokens), and Options.Local applies.
	Verify func(token string) (service.Principal, bool)
	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64
	// SessionTimeout closes idle sessions (default 10m).
	SessionTimeout time.Duration
	// Logger receives the transport's log; nil discards.
	Logger *slog.Logger
}

// HTTPHandler serves srv over streamable HTTP. With Verify set, every
// request needs a bearer token, and a session stays bound to the principal
// that opened it.
func HTTPHandler(srv *mcp.Server, opts *HTTPOptions) http.Handler {
	o := HTTPOptions{}
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 10 * time.Minute
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: o.MaxBodyBytes, SessionTimeout: o.SessionTimeout, Logger: o.Logger})
	if o.Verify != nil {
		verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			p, ok := o.Verify(token)
			if !ok {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: p.ID, Expiration: time.Now().Add(24 * time.Hour)}, nil
		}
		h = auth.RequireBearerToken(verify, nil)(h)
	}
	return h
}

// ServeStdio serves srv over in and out (newline-delimited JSON-RPC) until
// the peer closes in or ctx ends.
func ServeStdio(ctx context.Context, srv *mcp.Server, in io.ReadCloser, out io.WriteCloser) error {
	t := &mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: 4 << 20}
	err := srv.Run(ctx, t)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}
