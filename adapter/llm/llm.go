package llm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/secrets"
)

// Agent is a chat model with a tool loop. It is safe for concurrent use.
type Agent struct {
	cfg      *checked
	provider string
	model    Model
	client   *egress.Client
	keyName  string // "" when the agent sends no key
	peer     string
	card     agent.Card
}

var _ agent.Agent = (*Agent)(nil)

// New returns an agent for cfg, with a provider from opts. Its egress
// allowlist is opts.Egress.Allowlist, or the endpoint's host when that is
// empty. Its API key is cfg.APIKeySecret or the provider's default, which
// becomes the card's (and so the node's) one secret.
func New(cfg *Config, opts *Options) (*Agent, error) {
	if cfg == nil {
		return nil, errors.New("llm: no configuration")
	}
	if opts == nil {
		opts = &Options{}
	}
	return build(*cfg, opts, nil)
}

func build(cfg Config, opts *Options, node *graph.NodeSpec) (*Agent, error) {
	p, err := opts.provider(cfg.Provider)
	if err != nil {
		return nil, err
	}
	c, err := check(cfg)
	if err != nil {
		return nil, err
	}
	base := cfg.BaseURL
	if base == "" {
		base = p.DefaultBaseURL
	}
	u, err := httpadapter.ParseURL(base)
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("base_url %s: a query string is not supported", httpadapter.Redacted(u))
	}
	keyName, err := apiKey(p, cfg, node)
	if err != nil {
		return nil, err
	}
	client, allow, err := httpadapter.Egress(timeouts(opts.Egress), node, u.String())
	if err != nil {
		return nil, fmt.Errorf("%s endpoint %s: %w", p.Name, httpadapter.Redacted(u), err)
	}
	m, err := p.New(u.String(), client.HTTPClient())
	if err != nil {
		client.CloseIdleConnections()
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	var needs []string
	if keyName != "" {
		needs = []string{keyName}
	}
	return &Agent{
		cfg: c, provider: p.Name, model: m, client: client, keyName: keyName,
		peer: p.Name + " " + u.Host,
		card: agent.Card{
			Name: "llm " + p.Name + ":" + cfg.Model, Description: cfg.Description, Kind: "llm",
			Secrets: needs, Egress: allow, Effects: []agent.Effect{agent.EffectRead}, ReadsOutside: true,
		},
	}, nil
}

// timeouts lengthens egress's defaults for model calls, which stream for
// minutes or think a while before answering; the node's timeout: is what
// bounds a call. An operator's own values are kept.
func timeouts(base *egress.Options) *egress.Options {
	var o egress.Options
	if base != nil {
		o = *base
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultRequestTimeout
	}
	if o.ResponseHeaderTimeout == 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	return &o
}

// apiKey decides which secret holds the key: the one the configuration
// names (which the node must declare), else the provider's default when the
// node declares it; a provider that needs a key and gets none is an error
// naming the secret to declare.
func apiKey(p Provider, cfg Config, node *graph.NodeSpec) (string, error) {
	name := cfg.APIKeySecret
	explicit := name != ""
	if !explicit {
		name = p.KeySecret
	}
	optional := p.KeyOptional || cfg.BaseURL != ""
	if node == nil { // the Go API: the card's secret becomes the node's
		if explicit || (name != "" && !optional) {
			return name, nil
		}
		return "", nil
	}
	if name != "" && slices.Contains(node.Secrets, name) {
		return name, nil
	}
	switch {
	case explicit:
		return "", fmt.Errorf("api_key_secret names %s, which the node does not declare: add it under the node's secrets:", name)
	case optional:
		return "", nil
	case name == "":
		return "", fmt.Errorf("provider %s needs an API key: name its secret with api_key_secret: and declare it under secrets:", p.Name)
	}
	return "", fmt.Errorf("provider %s needs an API key: declare secrets: [%s] on the node (or name another secret with api_key_secret:)", p.Name, name)
}

// Card describes the agent: kind llm, reads from outside, effect read (the
// endpoint is the operator's, guarded by the node's egress policy; what the
// model chooses to do goes through tools, each with its own effects), and
// its API-key secret.
func (a *Agent) Card() agent.Card { return a.card }

// Close releases the agent's idle connections.
func (a *Agent) Close() error { a.client.CloseIdleConnections(); return nil }

// Run renders the prompt, asks the model, runs the tool calls it makes
// through the kernel, and returns its final answer as text. The output's
// metadata holds "usage" (input_tokens, output_tokens, total_tokens) and
// counts of model calls and tool calls.
func (a *Agent) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	// A model call is a read: its endpoint is fixed by the operator and
	// guarded by the node's egress policy. What the model chooses to do goes
	// through tools, each a call with its own effects and approvals.
	if err := agent.Permit(ctx, agent.EffectRead); err != nil {
		return agent.Message{}, err
	}
	var key secrets.Secret
	if a.keyName != "" {
		s, ok := agent.SecretsFrom(ctx).Get(a.keyName)
		if !ok || s.IsZero() {
			return agent.Message{}, fmt.Errorf("%s: secret %s was not given to this call: declare it under the node's secrets: and make sure it is set", a.peer, a.keyName)
		}
		key = s
	}
	prompt, err := a.cfg.render(in)
	if err != nil {
		return agent.Message{}, &agent.InputError{Agent: a.card.Name, Reason: err.Error()}
	}
	tools := agent.ToolsFrom(ctx)
	tm := newToolMap(tools.List())
	req := &Request{
		Model: a.cfg.Model, System: a.cfg.System, Tools: tm.defs, MaxTokens: a.cfg.MaxTokens,
		Temperature: a.cfg.Temperature, Stream: a.cfg.stream, APIKey: key,
		Messages: []Message{{Role: RoleUser, Text: prompt}},
	}
	var st stats
	for round := 0; ; round++ {
		if !agent.TokensLeft(ctx) {
			return agent.Message{}, fmt.Errorf("%s: no token budget left for another model call: %w", a.peer, &kernel.LimitError{Limit: "tokens"})
		}
		resp, err := a.model.Complete(ctx, req)
		if err != nil {
			return agent.Message{}, err
		}
		st.calls++
		if resp.Usage.Total() == 0 {
			// A server that reports no usage is still charged, by estimate.
			resp.Usage, st.estimated = estimate(req, resp), true
		}
		st.usage.InputTokens += resp.Usage.InputTokens
		st.usage.OutputTokens += resp.Usage.OutputTokens
		if err := agent.ChargeUsage(ctx, a.cfg.Model, resp.Usage.InputTokens, resp.Usage.OutputTokens); err != nil {
			return agent.Message{}, fmt.Errorf("%s: the model's answer used %d tokens: %w", a.peer, resp.Usage.Total(), err)
		}
		if len(resp.ToolCalls) == 0 {
			out := agent.Text(resp.Text)
			out.Metadata = st.metadata(a, resp.StopReason)
			return out, nil
		}
		if round >= a.cfg.maxSteps {
			return agent.Message{}, fmt.Errorf("%s: the model still asked for tools after %d rounds: %w",
				a.peer, a.cfg.maxSteps, &kernel.LimitError{Limit: "llm tool rounds (max_steps)", Max: int64(a.cfg.maxSteps)})
		}
		results := make([]ToolResult, 0, len(resp.ToolCalls))
		for i, tc := range resp.ToolCalls {
			r, err := a.callTool(ctx, tools, tm, tc, i, &st)
			if err != nil {
				return agent.Message{}, err
			}
			results = append(results, r)
		}
		req.Messages = append(req.Messages,
			Message{Role: RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls},
			Message{Role: RoleTool, ToolResults: results})
	}
}

// stats count what one Run did.
type stats struct {
	usage                   Usage
	estimated               bool
	calls, tools            int
	refused, denied, failed int
}

// estimate counts a call's tokens at four bytes a token, for servers that
// report no usage.
func estimate(req *Request, resp *Response) Usage {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Text)
		for _, tc := range m.ToolCalls {
			in += len(tc.Name) + len(tc.Args)
		}
		for _, r := range m.ToolResults {
			in += len(r.Content)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + 64
	}
	out := len(resp.Text)
	for _, tc := range resp.ToolCalls {
		out += len(tc.Name) + len(tc.Args)
	}
	return Usage{InputTokens: int64(in/4 + 1), OutputTokens: int64(out/4 + 1)}
}

func (s *stats) metadata(a *Agent, stop string) map[string]any {
	return map[string]any{
		"usage": map[string]any{
			"input_tokens": s.usage.InputTokens, "output_tokens": s.usage.OutputTokens, "total_tokens": s.usage.Total(),
			"estimated": s.estimated,
		},
		"provider": a.provider, "model": a.cfg.Model, "stop_reason": stop,
		"model_calls": s.calls, "tool_calls": s.tools,
		"refused_tool_calls": s.refused, "denied_tool_calls": s.denied, "failed_tool_calls": s.failed,
	}
}

// callTool runs one of the model's tool calls through the kernel and
// returns what the model is told. A name the node was not given is refused
// and never run; a tool's failure or the kernel's refusal is fed back as a
// tool error, so the model can adapt. It returns an error only for what
// must stop the node: a cancelled run, a spent budget, a pending approval,
// an audit log that cannot be written.
func (a *Agent) callTool(ctx context.Context, tools agent.Tools, tm *toolMap, tc ToolCall, i int, st *stats) (ToolResult, error) {
	res := ToolResult{CallID: tc.ID, IsError: true}
	entry, ok := tm.byWir[tc.Name]
	switch {
	case !ok:
		st.refused++
		if len(tm.names) == 0 {
			res.Content = fmt.Sprintf("refused: there is no tool %q, and no tools are available", tc.Name)
		} else {
			res.Content = fmt.Sprintf("refused: there is no tool %q; the tools you may call are: %s", tc.Name, strings.Join(tm.names, ", "))
		}
		return res, nil
	case i >= maxCallsPerRound:
		st.refused++
		res.Content = fmt.Sprintf("refused: at most %d tool calls are run per turn", maxCallsPerRound)
		return res, nil
	}
	args, problem := entry.args(tc.Args)
	if problem != "" {
		st.failed++
		res.Content = "error: " + problem
		return res, nil
	}
	st.tools++
	out, err := tools.Call(ctx, entry.name, args)
	if err != nil {
		if fatal(ctx, err) {
			return res, err
		}
		var d *kernel.DeniedError
		if errors.As(err, &d) {
			st.denied++
			res.Content = "refused: " + d.Reason
		} else {
			st.failed++
			res.Content = "error: " + oneLine(err.Error(), 2000)
		}
		return res, nil
	}
	res.IsError, res.Content = false, resultText(out)
	return res, nil
}

// fatal reports whether a tool call's error must stop the node rather than
// be told to the model.
func fatal(ctx context.Context, err error) bool {
	var l *kernel.LimitError
	var p *kernel.ApprovalPendingError
	var au *kernel.AuditError
	var d *kernel.DeniedError
	return ctx.Err() != nil || errors.As(err, &l) || errors.As(err, &p) || errors.As(err, &au) ||
		errors.As(err, &d) && d.Terminate ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
