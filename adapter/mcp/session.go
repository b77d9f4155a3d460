package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	bhttp "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/sandbox"
)

// minimalPath is the whole PATH a stdio server gets.
const minimalPath = "/usr/bin:/bin"

// maxTools bounds the tool list read from one server (and so the pages of
// a server that never stops paginating).
const maxTools = 10_000

// server is one configured MCP server: how to open a session with it.
type server struct {
	label   string // URL or command, for messages
	peer    string // agent.PeerError.Peer
	url     string
	eg      *egress.Client
	hosts   []string       // the allowlist
	headers *bhttp.Headers // added to every request
	command string
	args    []string
	starter Starter
	stderr  io.Writer
}

func newServer(cfg *Config) (*server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var opts Options
	if cfg.Options != nil {
		opts = *cfg.Options
	}
	s := &server{label: cfg.label(), starter: opts.Starter, stderr: opts.Stderr}
	if cfg.Command != "" {
		s.command, s.args, s.peer = cfg.Command, slices.Clone(cfg.Args), "mcp "+cfg.Command
		if s.starter == nil {
			o, err := sandbox.NewOS(nil)
			if err != nil {
				return nil, confinementError(err)
			}
			s.starter = &SandboxStarter{OS: o}
		}
		return s, nil
	}
	u, _ := url.Parse(cfg.URL) // check parsed it
	s.url, s.peer = cfg.URL, "mcp "+u.Host
	// The URL is decided now, so a topology naming a blocked address fails
	// to compile; the address dialed is decided again on every request.
	eg, hosts, err := bhttp.Egress(opts.Egress, &graph.NodeSpec{Egress: cfg.Egress, AllowPrivate: cfg.AllowPrivate}, cfg.URL)
	if err != nil {
		return nil, err
	}
	s.eg, s.hosts = eg, hosts
	if s.headers, err = bhttp.NewHeaders(cfg.Headers, cfg.Auth, cfg.Secrets); err != nil {
		return nil, err
	}
	return s, nil
}

// effect is what reaching the server does: start a program, or send data
// out of the process.
func (s *server) effect() agent.Effect {
	if s.url != "" {
		return agent.EffectEgress
	}
	return agent.EffectExec
}

// egressHosts are the hosts the card declares.
func (s *server) egressHosts() []string { return slices.Clone(s.hosts) }

// connect opens an initialized session. The caller closes it.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "babel", Version: "1"}, &mcp.ClientOptions{
		// Nothing to offer a server: no roots, no sampling, no elicitation,
		// and no automatic answers to its input requests.
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	var t mcp.Transport
	var proc io.Closer
	if s.url != "" {
		if err := s.eg.Check(s.url); err != nil {
			return nil, s.fail("connect", err) // refused before any byte leaves
		}
		t = &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: s.headers.Client(ctx, s.eg), MaxRetries: -1, DisableStandaloneSSE: true}
	} else {
		env := map[string]string{"PATH": minimalPath}
		ss := agent.SecretsFrom(ctx)
		for _, n := range ss.Names() {
			if v, ok := ss.Get(n); ok {
				env[n] = v.Reveal() // on the wire: the server's environment is where it uses them
			}
		}
		p, err := s.starter.Start(ctx, &Command{Path: s.command, Args: s.args, Env: env, Stderr: s.stderr})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, agent.NewPeerError(s.peer, 0, false, "cannot start the server: "+err.Error(), err)
		}
		proc = p
		t = &mcp.IOTransport{Reader: io.NopCloser(p), Writer: p}
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		if proc != nil {
			_ = proc.Close()
		}
		return nil, s.fail("connect", err)
	}
	return cs, nil
}

// list reads the server's whole tool list.
func (s *server) list(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, s.fail("list tools", err)
		}
		if len(tools) == maxTools {
			return nil, agent.NewPeerError(s.peer, 0, false, fmt.Sprintf("the server lists more than %d tools", maxTools), nil)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// fail turns an error of the session into what a caller decides on: the
// context's error when the call was cancelled, the egress guard's refusal
// (never retried), a JSON-RPC error from the server (never retried), or a
// transport failure (retryable). A peer's own words are kept in Err, never
// in the message.
func (s *server) fail(op string, err error) error {
	var pe *egress.PolicyError
	if errors.As(err, &pe) {
		return agent.NewPeerError(s.peer, 0, false, op+": "+pe.Error(), pe)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w", s.peer, op, err)
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return agent.NewPeerError(s.peer, int(we.Code), false, op+": the server answered with JSON-RPC error "+codeName(we.Code), err)
	}
	var le *egress.LimitError
	if errors.As(err, &le) {
		return agent.NewPeerError(s.peer, 0, false, op+": "+le.Error(), err)
	}
	return agent.NewPeerError(s.peer, 0, true, op+": the session failed", err)
}

func codeName(code int64) string {
	switch code {
	case jsonrpc.CodeParseError:
		return fmt.Sprintf("%d (parse error)", code)
	case jsonrpc.CodeInvalidRequest:
		return fmt.Sprintf("%d (invalid request)", code)
	case jsonrpc.CodeMethodNotFound:
		return fmt.Sprintf("%d (method not found)", code)
	case jsonrpc.CodeInvalidParams:
		return fmt.Sprintf("%d (invalid params)", code)
	case jsonrpc.CodeInternalError:
		return fmt.Sprintf("%d (internal error)", code)
	}
	return fmt.Sprint(code)
}
