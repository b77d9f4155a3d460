package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
)

// New returns the agent for tool of the server cfg describes, without
// connecting: its card holds the tool's name and the server's effects, and
// the description and input schema arrive with the first call. cfg.Pin is
// required. Use Tool or Tools for agents whose cards carry the server's
// description and schema.
func New(cfg *Config, tool string) (agent.Agent, error) {
	if tool == "" {
		return nil, fmt.Errorf("no tool name")
	}
	if err := checkPin(cfg.Pin); err != nil {
		return nil, err
	}
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	return newToolAgent(s, tool, cfg.Pin, nil), nil
}

// Tools connects to the server cfg describes, checks its tool list against
// cfg.Pin and returns one agent per tool, each card carrying the tool's
// description and input schema. A list that differs from the pin (or no
// pin) is refused: the error is an *agent.PeerError (never retryable) in
// which errors.As finds a *PinError.
func Tools(ctx context.Context, cfg *Config) ([]agent.Agent, error) {
	s, defs, err := discover(ctx, cfg)
	if err != nil {
		return nil, err
	}
	out := make([]agent.Agent, 0, len(defs))
	for _, d := range defs {
		out = append(out, newToolAgent(s, d.Name, cfg.Pin, defs))
	}
	return out, nil
}

// Tool is Tools for the one tool named name.
func Tool(ctx context.Context, cfg *Config, name string) (agent.Agent, error) {
	s, defs, err := discover(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(defs, func(d toolDef) bool { return d.Name == name }) {
		return nil, fmt.Errorf("%s has no tool %q (it offers %s)", s.label, name, names(defs))
	}
	return newToolAgent(s, name, cfg.Pin, defs), nil
}

// discover reads and checks a server's tool list.
func discover(ctx context.Context, cfg *Config) (*server, []toolDef, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Pin != "" {
		if err := checkPin(cfg.Pin); err != nil {
			return nil, nil, err
		}
	}
	cs, err := s.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer cs.Close()
	tools, err := s.list(ctx, cs)
	if err != nil {
		return nil, nil, err
	}
	digest, _, err := Digest(tools)
	if err != nil {
		return nil, nil, agent.NewPeerError(s.peer, 0, false, "unusable tool list: "+err.Error(), err)
	}
	if digest != cfg.Pin {
		return nil, nil, (&PinError{Server: s.label, Want: cfg.Pin, Got: digest}).refusal(s.peer)
	}
	defs, _ := defsOf(tools) // Digest succeeded
	return s, defs, nil
}

func names(defs []toolDef) string {
	if len(defs) == 0 {
		return "no tools"
	}
	var b bytes.Buffer
	for i, d := range defs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", d.Name)
	}
	return b.String()
}

// toolAgent is one tool of one server. Each Run opens its own session, so
// Run is safe for concurrent use.
type toolAgent struct {
	srv  *server
	name string
	pin  string
	card agent.Card

	mu sync.Mutex
	// pinned are the definitions that matched the pin, once seen; with
	// them, a later mismatch says what changed. schema is this tool's
	// compiled input schema (fixed by the pin, so compiled once).
	pinned   []toolDef
	schema   *jsonschema.Schema
	compiled bool
}

func newToolAgent(s *server, name, pin string, defs []toolDef) *toolAgent {
	a := &toolAgent{srv: s, name: name, pin: pin}
	a.card = agent.Card{
		Name:         name,
		Kind:         Kind,
		Description:  fmt.Sprintf("MCP tool %q of %s", name, s.label),
		Effects:      []agent.Effect{s.effect()},
		Egress:       s.egressHosts(),
		Secrets:      s.headers.Secrets(),
		ReadsOutside: true,
	}
	if defs != nil {
		a.pinned = defs
		for _, d := range defs {
			if d.Name == name {
				a.card.Description = d.Description
				a.card.InputSchema = d.InputSchema
				a.card.OutputSchema = d.OutputSchema
			}
		}
	}
	return a
}

func (a *toolAgent) Card() agent.Card { return a.card }

// Run calls the tool with the message's value as its arguments (a JSON
// object). The session is opened and closed within the call; the server's
// tool list is checked against the pin before anything is sent to the tool.
func (a *toolAgent) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	args, err := arguments(a.name, in)
	if err != nil {
		return agent.Message{}, err
	}
	if err := agent.Permit(ctx, a.srv.effect()); err != nil {
		return agent.Message{}, err
	}
	cs, err := a.srv.connect(ctx)
	if err != nil {
		return agent.Message{}, err
	}
	defer cs.Close()
	tools, err := a.srv.list(ctx, cs)
	if err != nil {
		return agent.Message{}, err
	}
	schema, err := a.verify(tools)
	if err != nil {
		return agent.Message{}, err
	}
	if err := validate(a.name, schema, args); err != nil {
		return agent.Message{}, err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: a.name, Arguments: args})
	if err != nil {
		return agent.Message{}, a.srv.fail("call tool "+a.name, err)
	}
	if res.NeedsInput() {
		return agent.Message{}, agent.NewPeerError(a.srv.peer, 0, false,
			fmt.Sprintf("tool %q asked for more input, which a node call cannot give", a.name), nil)
	}
	msg, err := toMessage(res)
	if err != nil {
		return agent.Message{}, agent.NewPeerError(a.srv.peer, 0, false, "malformed tool result: "+err.Error(), err)
	}
	if res.IsError {
		te := &ToolError{Tool: a.name, Result: msg}
		return agent.Message{}, agent.NewPeerError(a.srv.peer, 0, false, te.Error(), te)
	}
	return msg, nil
}

// verify checks the server's tool list against the pin and returns the
// tool's compiled input schema.
func (a *toolAgent) verify(tools []*mcp.Tool) (*jsonschema.Schema, error) {
	digest, _, err := Digest(tools)
	if err != nil {
		return nil, agent.NewPeerError(a.srv.peer, 0, false, "unusable tool list: "+err.Error(), err)
	}
	defs, _ := defsOf(tools)
	a.mu.Lock()
	defer a.mu.Unlock()
	if digest != a.pin {
		pe := &PinError{Server: a.srv.label, Want: a.pin, Got: digest}
		if a.pinned != nil {
			pe.Changed = changes(a.pinned, defs)
		}
		return nil, pe.refusal(a.srv.peer)
	}
	if a.pinned == nil {
		a.pinned = defs
	}
	if !a.compiled {
		i := slices.IndexFunc(defs, func(d toolDef) bool { return d.Name == a.name })
		if i < 0 {
			// The pin was taken of a list without this tool: the
			// configuration names a tool the reviewed server never had.
			return nil, agent.NewPeerError(a.srv.peer, 0, false, fmt.Sprintf("the pinned server has no tool %q (it offers %s)", a.name, names(defs)), nil)
		}
		s, err := compileSchema(defs[i].InputSchema)
		if err != nil {
			return nil, agent.NewPeerError(a.srv.peer, 0, false, fmt.Sprintf("tool %q has an input schema that does not compile: %v", a.name, err), err)
		}
		a.schema, a.compiled = s, true
	}
	return a.schema, nil
}

// arguments reads a message as a tool's arguments: a JSON object, given as
// a data part or as text holding one. An empty message is no arguments.
func arguments(tool string, in agent.Message) (json.RawMessage, error) {
	if len(in.Parts) == 0 {
		return json.RawMessage(`{}`), nil
	}
	var raw []byte
	if len(in.Parts) == 1 && in.Parts[0].Kind == agent.PartText {
		raw = bytes.TrimSpace([]byte(in.Parts[0].Text))
		if len(raw) == 0 || raw[0] != '{' {
			return nil, &agent.InputError{Agent: tool, Reason: "an MCP tool takes a JSON object of arguments, not text"}
		}
	} else {
		v, err := in.Value()
		if err != nil {
			return nil, &agent.InputError{Agent: tool, Reason: err.Error()}
		}
		raw = bytes.TrimSpace(v)
	}
	if !json.Valid(raw) {
		return nil, &agent.InputError{Agent: tool, Reason: "arguments are not valid JSON"}
	}
	switch raw[0] {
	case '{':
		return raw, nil
	case 'n':
		return json.RawMessage(`{}`), nil
	case '[':
		return nil, &agent.InputError{Agent: tool, Reason: "an MCP tool takes a JSON object of arguments, not an array"}
	case '"':
		return nil, &agent.InputError{Agent: tool, Reason: "an MCP tool takes a JSON object of arguments, not a string"}
	}
	return nil, &agent.InputError{Agent: tool, Reason: "an MCP tool takes a JSON object of arguments, not " + string(raw)}
}

var _ agent.Agent = (*toolAgent)(nil)
