package run_test

import (
	"context"
	"strings"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
)

// registeringScoper hands out one secret and, as the secrets broker does,
// registers its value with the redactor only when a call first asks for it.
type registeringScoper struct {
	red   *secrets.Redactor
	value string
}

func (s *registeringScoper) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	s.red.Register(s.value)
	ss := make([]secrets.Secret, 0, len(names))
	for _, n := range names {
		ss = append(ss, secrets.New(n, s.value))
	}
	return agent.NewSecrets(ss...), nil
}

// registeringRunner runs graphs on a kernel whose secret source registers
// value with the redactor when a call first asks for a secret.
func registeringRunner(t *testing.T, value string) *run.Runner {
	t.Helper()
	red := secrets.NewRedactor()
	k := kernel.New(&kernel.Options{Redactor: red, Secrets: &registeringScoper{red: red, value: value}})
	return newRunner(t, &run.Config{Kernel: k})
}

// says returns fixed text whatever its input.
type says string

func (s says) Card() agent.Card { return agent.Card{Name: "test:says", Kind: "fn"} }
func (s says) Run(context.Context, agent.Message) (agent.Message, error) {
	return agent.Text(string(s)), nil
}

// A node handing its input back untouched is not scanned again, since the
// kernel redacted that input already; but a secret first registered during
// the run may sit in an output redacted before it was, and then the
// pass-through output is scanned again.
func TestPassThroughOutputIsRedactedForASecretRegisteredMidRun(t *testing.T) {
	const value = "s3cr3t-value-registered-late"
	r := registeringRunner(t, value)
	g := build(t, graph.New("late").
		Add("leak", says("the value is "+value)).
		Add("pass", noop{}, graph.Declare(nil, nil, []string{"TOKEN"})).
		Add("again", noop{}))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	out := res.Output.Text()
	if strings.Contains(out, value) {
		t.Fatalf("the secret survived a pass-through node: %q", out)
	}
	if !strings.Contains(out, secrets.Redacted) {
		t.Fatalf("output %q: want the secret redacted", out)
	}
}

// A credential shape produced by one node stays redacted through a chain
// of pass-through nodes.
func TestPassThroughChainKeepsOutputRedacted(t *testing.T) {
	const key = "sk-abcdefghijklmnopqrstuvwxyz012345"
	r := newRunner(t, nil)
	g := build(t, graph.New("chain").Add("leak", says("key "+key)).Add("p1", noop{}).Add("p2", noop{}))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if out := res.Output.Text(); strings.Contains(out, key) || !strings.Contains(out, secrets.Redacted) {
		t.Fatalf("output %q: want the key redacted", out)
	}
}

// A join's object is keyed by node names; under a name that reads as a
// credential's key the value is redacted whole, as in any JSON the kernel
// scans, even when the join hands its input back untouched.
func TestJoinUnderACredentialNamedNodeIsRedacted(t *testing.T) {
	r := newRunner(t, nil)
	g := build(t, graph.New("keys").
		Add("password", says("hunter2-but-longer"), graph.After()).
		Add("other", says("plain"), graph.After()).
		Add("join", noop{}, graph.After("password", "other")))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	raw, err := res.Output.Value()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "hunter2") || !strings.Contains(string(raw), `"other":"plain"`) {
		t.Fatalf("join output %s: want the password node's value redacted and the other kept", raw)
	}
}

// A join handing back its object untouched is scanned again when a secret
// was first registered during the run.
func TestPassThroughJoinIsRedactedForASecretRegisteredMidRun(t *testing.T) {
	const value = "another-secret-registered-late"
	r := registeringRunner(t, value)
	g := build(t, graph.New("late-join").
		Add("a", says("a has "+value), graph.After()).
		Add("b", says("b"), graph.After()).
		Add("scope", says("scoped"), graph.After(), graph.Declare(nil, nil, []string{"TOKEN"})).
		Add("join", noop{}, graph.After("a", "b")).
		Add("last", noop{}, graph.After("join", "scope")))
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("x")})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	raw, _ := res.Output.Value()
	if strings.Contains(string(raw), value) {
		t.Fatalf("the secret survived a pass-through join: %s", raw)
	}
}
