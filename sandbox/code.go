package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/secrets"
)

// Lang is a language a code node is written in.
type Lang string

const (
	// LangJavaScript runs on QuickJS in the wasm sandbox.
	LangJavaScript Lang = "javascript"
	// LangPython runs on the system python3 in the os sandbox.
	LangPython Lang = "python"
	// LangWasm is a WASI module, run in the wasm sandbox.
	LangWasm Lang = "wasm"
)

// PythonPath is the interpreter the os sandbox runs Python code with.
const PythonPath = "/usr/bin/python3"

// ParseLang returns the language named s ("js", "javascript", "py",
// "python", "python3", "wasm").
func ParseLang(s string) (Lang, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "js", "javascript":
		return LangJavaScript, nil
	case "py", "python", "python3":
		return LangPython, nil
	case "wasm", "wasi":
		return LangWasm, nil
	}
	return "", fmt.Errorf("unknown code language %q (want javascript, python or wasm)", s)
}

// Python returns the Spec that runs code with the system python3 in an os
// sandbox: the code is the read-only file WorkDir/main.py, run in isolated
// mode (no PYTHON* variable, no user site directory).
func Python(code string) *Spec {
	return &Spec{
		Program: PythonPath,
		Args:    []string{"-I", "-B", WorkDir + "/main.py"},
		Files:   []File{{Name: "main.py", Data: []byte(code)}},
	}
}

// JavaScript returns the Spec that evaluates code on QuickJS in a wasm
// sandbox. The code sees its stdin as the global input (parsed when it is
// JSON) and its environment as the global env (and std.getenv); its
// completion value, awaited if a promise, becomes Result.Value.
func JavaScript(code string) *Spec {
	return &Spec{Program: ProgramJS, Code: []byte(code)}
}

// WasmModule returns the Spec that runs a WASI module in a wasm sandbox.
func WasmModule(module []byte) *Spec { return &Spec{Code: module} }

// Code returns the sandbox kind and the Spec that run source written in lang.
func Code(lang Lang, source []byte) (Kind, *Spec, error) {
	switch lang {
	case LangJavaScript:
		return KindWasm, JavaScript(string(source)), nil
	case LangPython:
		return KindOS, Python(string(source)), nil
	case LangWasm:
		return KindWasm, WasmModule(source), nil
	}
	return "", nil, fmt.Errorf("unknown code language %q (want javascript, python or wasm)", lang)
}

// Sandboxes holds one sandbox of each kind. A nil member is a kind that is
// not available; asking for it fails closed.
type Sandboxes struct {
	Wasm *Wasm
	OS   *OS
}

// For returns the sandbox of kind k.
func (s *Sandboxes) For(k Kind) (Sandbox, error) {
	switch {
	case k == KindWasm && s != nil && s.Wasm != nil:
		return s.Wasm, nil
	case k == KindOS && s != nil && s.OS != nil:
		return s.OS, nil
	case k == KindWasm || k == KindOS:
		return nil, &SetupError{Kind: k, Reason: "no sandbox of this kind is configured"}
	}
	return nil, &SetupError{Kind: k, Reason: "unknown sandbox kind"}
}

// CodeOptions configures a code agent. Nil means the defaults.
type CodeOptions struct {
	// Name names the agent; empty means "code:LANG".
	Name        string
	Description string
	// Secrets lists the secrets the code reads, as environment variables of
	// the same name. The agent takes them from agent.SecretsFrom(ctx), and
	// fails if one is missing; no other variable reaches the code.
	Secrets []string
	// Limits bound each run; zero fields take DefaultLimits.
	Limits Limits
	// Sandboxes runs the code. Nil makes a private one for this agent; share
	// one between agents, or each JavaScript agent compiles QuickJS anew.
	Sandboxes *Sandboxes
	// Egress, when set, lets Python code reach the hosts it allows through
	// the os sandbox's egress proxy, and JavaScript through fetch (see
	// Spec.Egress); the card then has the egress effect and lists the
	// allowlist. A WASI module has no network and refuses it. Nil means no
	// network.
	Egress *egress.Options
}

// CodeAgent returns an agent that runs source, written in lang, in a
// sandbox: JavaScript and WASI modules in the wasm sandbox (Card kind
// "wasm"), Python in the os sandbox (Card kind "process"). The input
// message's value is the code's stdin, as JSON (JavaScript also gets it as
// the global input). The output is the JavaScript completion value when
// there is one, else stdout: a data part when stdout is JSON, text
// otherwise. A non-zero exit is an *ExitError.
func CodeAgent(lang Lang, source string, opts *CodeOptions) (agent.Agent, error) {
	if opts == nil {
		opts = &CodeOptions{}
	}
	kind, spec, err := Code(lang, []byte(source))
	if err != nil {
		return nil, err
	}
	sbs := opts.Sandboxes
	if sbs == nil {
		sbs = &Sandboxes{}
		switch kind {
		case KindWasm:
			if sbs.Wasm, err = NewWasm(context.Background(), nil); err != nil {
				return nil, err
			}
		case KindOS:
			if sbs.OS, err = NewOS(nil); err != nil {
				return nil, err
			}
		}
	}
	sb, err := sbs.For(kind)
	if err != nil {
		return nil, err
	}
	for _, name := range opts.Secrets {
		if err := checkEnv(map[string]string{name: ""}); err != nil {
			return nil, fmt.Errorf("code agent: secret name %q cannot be an environment variable", name)
		}
	}
	name := opts.Name
	if name == "" {
		name = "code:" + string(lang)
	}
	cardKind := "wasm"
	if kind == KindOS {
		cardKind = "process"
	}
	spec.Limits = opts.Limits
	card := agent.Card{
		Name: name, Description: opts.Description, Kind: cardKind,
		Secrets: append([]string(nil), opts.Secrets...),
		Effects: []agent.Effect{agent.EffectExec},
	}
	if opts.Egress != nil {
		if lang == LangWasm {
			return nil, fmt.Errorf("code agent %s: a wasm module has no network (no sockets, no fetch); only python and javascript code can declare egress", name)
		}
		spec.Egress = CloneEgress(opts.Egress)
		card.Effects = append(card.Effects, agent.EffectEgress)
		card.Egress = slices.Clone(opts.Egress.Allowlist)
	}
	return &codeAgent{sb: sb, spec: spec, card: card}, nil
}

type codeAgent struct {
	sb   Sandbox
	spec *Spec // a template: never modified after construction
	card agent.Card
}

func (c *codeAgent) Card() agent.Card { return c.card }

func (c *codeAgent) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	stdin, err := in.Value()
	if err != nil {
		stdin = []byte("null")
	}
	env, values, err := SecretEnv(ctx, c.card.Name, c.card.Secrets)
	if err != nil {
		return agent.Message{}, err
	}
	spec := *c.spec
	spec.Stdin, spec.Env = stdin, env
	res, err := c.sb.Run(ctx, &spec)
	if err != nil {
		return agent.Message{}, fmt.Errorf("%s: %w", c.card.Name, err)
	}
	if res.ExitCode != 0 {
		return agent.Message{}, fmt.Errorf("%s: %w", c.card.Name, &ExitError{Code: res.ExitCode, Stderr: Redact(tail(res.Stderr, 2048), values)})
	}
	var out agent.Message
	switch {
	case res.Value != nil:
		out = agent.FromJSON(res.Value)
	default:
		out = OutputMessage(res.Stdout)
	}
	return out.WithLabels(in.Labels), nil
}

// CloneEgress returns a copy of o whose lists are its own, or nil.
func CloneEgress(o *egress.Options) *egress.Options {
	if o == nil {
		return nil
	}
	c := *o
	c.Allowlist = slices.Clone(o.Allowlist)
	c.AllowPrivate = slices.Clone(o.AllowPrivate)
	return &c
}

// OutputMessage turns a program's stdout into a message: a data part when it
// is one JSON value, text otherwise.
func OutputMessage(stdout []byte) agent.Message {
	trimmed := strings.TrimSpace(string(stdout))
	if trimmed != "" && json.Valid([]byte(trimmed)) {
		return agent.FromJSON(json.RawMessage(trimmed))
	}
	return agent.Text(strings.TrimRight(string(stdout), "\n"))
}

// SecretEnv builds the environment of a sandboxed call from the secrets the
// kernel scoped to it: exactly the names declared, each as a variable of
// the same name. It fails if a declared secret was not provided. values
// lists the secret values, for Redact.
func SecretEnv(ctx context.Context, agentName string, declared []string) (env map[string]string, values []string, err error) {
	ss := agent.SecretsFrom(ctx)
	env = make(map[string]string, len(declared))
	for _, name := range declared {
		s, ok := ss.Get(name)
		if !ok {
			return nil, nil, fmt.Errorf("%s: secret %s is declared but was not provided to this call", agentName, name)
		}
		env[name] = s.Reveal()
		values = append(values, s.Reveal())
	}
	return env, values, nil
}

// Redact replaces every secret value in s with [REDACTED]: a program's
// stderr may echo its secrets, and an error must not carry them.
func Redact(s string, values []string) string {
	for _, v := range values {
		if v != "" {
			s = strings.ReplaceAll(s, v, secrets.Redacted)
		}
	}
	return s
}

var _ agent.Agent = (*codeAgent)(nil)
