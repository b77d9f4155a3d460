package catalog

import (
	"context"
	"strings"

	"github.com/babelagent/babel/sandbox"
)

// Check is one line of `babel doctor`.
type Check struct {
	Family string `json:"family"` // adapter, sandbox, store
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Doctor reports which kinds are usable on this machine, and why not. It
// starts each sandbox for real (sandbox.Doctor), and says of the kinds that
// need one whether it can start: those fail closed where it cannot.
func Doctor(ctx context.Context) []Check { return doctor(ctx, nil) }

func doctor(ctx context.Context, osOpts *sandbox.OSOptions) []Check {
	sbChecks := sandbox.Doctor(ctx, osOpts)
	sb := map[string]sandbox.Check{}
	for _, c := range sbChecks {
		sb[c.Name] = c
	}
	osc, ok := sb["os"]
	if !ok {
		osc = sandbox.Check{Name: "os", Detail: "not checked"}
	}
	checks := []Check{
		{Family: "adapter", Name: "builtin", OK: true, Detail: "trim, upper, lower, echo, merge, template, jsonpath, sleep, fail"},
		{Family: "adapter", Name: "fn", OK: true, Detail: "typed Go functions (agent.Func)"},
		{Family: "adapter", Name: "http", OK: true, Detail: "JSON/text endpoints through the egress guard"},
		{Family: "adapter", Name: "openapi", OK: true, Detail: "one operation of an OpenAPI 3.x document; arguments validated before any request; pin with digest:"},
		{Family: "adapter", Name: "mcp", OK: true, Detail: "MCP tools over streamable HTTP; tool lists pinned by digest (pin: is required)"},
		needsOS("mcp+stdio", osc,
			"stdio MCP servers confined by bubblewrap: no network, no host environment, only the node's secrets, killed whole with their session; tool lists pinned by digest",
			"stdio MCP servers run only under bubblewrap, and nodes using them fail"),
		{Family: "adapter", Name: "a2a", OK: true, Detail: "A2A 1.0 agents (JSON-RPC): send, stream, poll, cancel"},
		{Family: "adapter", Name: "llm", OK: true, Detail: "openai (and OpenAI-compatible: vLLM, llama.cpp), anthropic, ollama; tool calls go through the kernel; the API key is a declared secret (OPENAI_API_KEY, ANTHROPIC_API_KEY)"},
		codeCheck(sb),
		needsOS(KindProcess, osc,
			"programs in the os sandbox (bubblewrap), one JSON message in and out",
			"programs run only under bubblewrap, and nodes using them fail"),
	}
	for _, c := range sbChecks {
		checks = append(checks, Check{Family: "sandbox", Name: c.Name, OK: c.OK, Detail: c.Detail})
	}
	return checks
}

// needsOS is the check of an adapter that runs only in the os sandbox.
func needsOS(name string, osc sandbox.Check, ok, refused string) Check {
	if osc.OK {
		return Check{Family: "adapter", Name: name, OK: true, Detail: ok}
	}
	return Check{Family: "adapter", Name: name, OK: false, Detail: refused + ": the os sandbox cannot start here: " + osc.Detail}
}

// codeCheck says which languages a code node can be written in here.
func codeCheck(sb map[string]sandbox.Check) Check {
	var usable, not []string
	for _, l := range []struct{ check, lang string }{{"javascript", "js"}, {"python", "python"}, {"wasm", "wasm"}} {
		if sb[l.check].OK {
			usable = append(usable, l.lang)
		} else {
			not = append(not, l.lang)
		}
	}
	c := Check{Family: "adapter", Name: KindCode, OK: len(usable) > 0}
	switch {
	case len(usable) == 0:
		c.Detail = "no language can run here (see the sandbox lines); code nodes fail"
	case len(not) == 0:
		c.Detail = "code in a sandbox: " + strings.Join(usable, ", ")
	default:
		c.Detail = "code in a sandbox: " + strings.Join(usable, ", ") + "; not " + strings.Join(not, ", ") + " (see the sandbox lines)"
	}
	return c
}
