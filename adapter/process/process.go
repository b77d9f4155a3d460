// Package process makes a program an agent: the program reads one JSON
// agent.Message on stdin and writes one on stdout, and runs in the os
// sandbox (bubblewrap) on every call.
//
// This package must never start the program itself: every run goes through
// sandbox.OS, which fails closed when it cannot start. The program sees only
// the secrets its Card declares, as environment variables, and never the
// server's environment. It has no network unless Options.Egress names
// where it may go, and then only through the sandbox's egress proxy.
package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/sandbox"
)

// Options configures a process agent. Nil means the defaults.
type Options struct {
	Description string
	// Args are passed to the program.
	Args []string
	// Secrets lists the secrets the program reads, as environment variables
	// of the same name; taken from agent.SecretsFrom(ctx) on each call.
	Secrets []string
	// Limits bound each run; zero fields take sandbox.DefaultLimits.
	Limits sandbox.Limits
	// Sandbox runs the program. Nil means sandbox.NewOS(nil).
	Sandbox *sandbox.OS
	// Egress, when set, lets the program reach the hosts it allows through
	// the sandbox's egress proxy (sandbox.Spec.Egress: HTTP_PROXY and
	// HTTPS_PROXY point at it); the card then has the egress effect and
	// lists the allowlist. Nil means no network at all.
	Egress *egress.Options
}

// New returns an agent that runs program (an absolute host path to an
// executable file) in the os sandbox, placed there as sandbox.HostProgram
// says. A program under /usr runs in place (the sandbox sees /usr read
// only); any other program is read now and placed, read-only and
// executable, in the sandbox's work directory on each call — so the file
// that runs is the one that was configured, and the sandbox needs no view
// of the host's other files. Such a program must be self-contained (a
// static binary, or a script whose interpreter is under /usr).
func New(name, program string, opts *Options) (agent.Agent, error) {
	if opts == nil {
		opts = &Options{}
	}
	if name == "" {
		return nil, errors.New("process agent: empty name")
	}
	if !filepath.IsAbs(program) {
		return nil, fmt.Errorf("process agent %s: program %q is not an absolute path", name, program)
	}
	program = filepath.Clean(program)
	sb := opts.Sandbox
	if sb == nil {
		var err error
		if sb, err = sandbox.NewOS(nil); err != nil {
			return nil, fmt.Errorf("process agent %s: %w", name, err)
		}
	}
	inSandbox, files, err := sandbox.HostProgram(program)
	if err != nil {
		return nil, fmt.Errorf("process agent %s: %w", name, err)
	}
	// Read a copied program now, not on each call: the file that runs is
	// the one that was configured.
	for i, f := range files {
		if files[i].Data, err = os.ReadFile(f.Host); err != nil {
			return nil, fmt.Errorf("process agent %s: read program: %w", name, err)
		}
		files[i].Host = ""
	}
	spec := &sandbox.Spec{Program: inSandbox, Args: append([]string(nil), opts.Args...), Files: files, Limits: opts.Limits}
	card := agent.Card{
		Name: name, Description: opts.Description, Kind: "process",
		Secrets: append([]string(nil), opts.Secrets...),
		Effects: []agent.Effect{agent.EffectExec},
	}
	if opts.Egress != nil {
		spec.Egress = sandbox.CloneEgress(opts.Egress)
		card.Effects = append(card.Effects, agent.EffectEgress)
		card.Egress = slices.Clone(opts.Egress.Allowlist)
	}
	return &processAgent{sb: sb, spec: spec, card: card}, nil
}

type processAgent struct {
	sb   *sandbox.OS
	spec *sandbox.Spec // a template: never modified after New
	card agent.Card
}

func (p *processAgent) Card() agent.Card { return p.card }

func (p *processAgent) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	stdin, err := json.Marshal(in)
	if err != nil {
		return agent.Message{}, &agent.InputError{Agent: p.card.Name, Reason: "encode message: " + err.Error()}
	}
	env, values, err := sandbox.SecretEnv(ctx, p.card.Name, p.card.Secrets)
	if err != nil {
		return agent.Message{}, err
	}
	spec := *p.spec
	spec.Stdin, spec.Env = stdin, env
	res, err := p.sb.Run(ctx, &spec)
	if err != nil {
		return agent.Message{}, fmt.Errorf("process agent %s: %w", p.card.Name, err)
	}
	if res.ExitCode != 0 {
		return agent.Message{}, fmt.Errorf("process agent %s: %w", p.card.Name,
			&sandbox.ExitError{Code: res.ExitCode, Stderr: sandbox.Redact(lastLine(res.Stderr), values)})
	}
	var out agent.Message
	dec := json.NewDecoder(bytes.NewReader(res.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return agent.Message{}, fmt.Errorf("process agent %s: stdout is not one JSON message: %w", p.card.Name, err)
	}
	if dec.More() {
		return agent.Message{}, fmt.Errorf("process agent %s: stdout holds more than one JSON value", p.card.Name)
	}
	if err := out.Validate(); err != nil {
		return agent.Message{}, fmt.Errorf("process agent %s: output message: %w", p.card.Name, err)
	}
	// A program can add labels to what it returns, never remove the ones its
	// input carried.
	return out.WithLabels(in.Labels), nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 512 {
		s = s[len(s)-512:]
	}
	return s
}

var _ agent.Agent = (*processAgent)(nil)
