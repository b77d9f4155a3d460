package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/secrets"
)

func sharedSandboxes() *Sandboxes { return &Sandboxes{Wasm: testSB.wasm, OS: testSB.os} }

func withSecrets(ss ...secrets.Secret) context.Context {
	return agent.WithSecrets(context.Background(), agent.NewSecrets(ss...))
}

func TestCodeAgentJavaScript(t *testing.T) {
	t.Parallel()
	a, err := CodeAgent(LangJavaScript, `({total: input.items.reduce((s, x) => s + x, 0)})`, &CodeOptions{Sandboxes: sharedSandboxes()})
	if err != nil {
		t.Fatal(err)
	}
	card := a.Card()
	if card.Kind != "wasm" || !card.Has(agent.EffectExec) || card.Name != "code:javascript" {
		t.Fatalf("card %+v", card)
	}
	in, _ := agent.Data(map[string]any{"items": []int{1, 2, 3}})
	in.Labels = agent.Labels(0).With(agent.Untrusted)
	out, err := a.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := out.Value()
	if string(v) != `{"total":6}` || !out.Labels.Has(agent.Untrusted) {
		t.Fatalf("out %s labels %v", v, out.Labels)
	}
	// Without a completion value, stdout is the output.
	a, _ = CodeAgent(LangJavaScript, `console.log("plain " + input)`, &CodeOptions{Sandboxes: sharedSandboxes()})
	out, err = a.Run(context.Background(), agent.Text("text"))
	if err != nil || out.Text() != "plain text" {
		t.Fatalf("stdout output: %q %v", out.Text(), err)
	}
}

func TestCodeAgentPython(t *testing.T) {
	t.Parallel()
	a, err := CodeAgent(LangPython, "import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({'n': len(d['s'])}))\n",
		&CodeOptions{Name: "count", Sandboxes: sharedSandboxes()})
	if err != nil {
		t.Fatal(err)
	}
	if card := a.Card(); card.Kind != "process" || !card.Has(agent.EffectExec) || card.Name != "count" {
		t.Fatalf("card %+v", card)
	}
	in, _ := agent.Data(map[string]string{"s": "hello"})
	out, err := a.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := out.Value(); string(v) != `{"n": 5}` {
		t.Fatalf("out %s", v)
	}
	a, _ = CodeAgent(LangPython, "print('not json')", &CodeOptions{Sandboxes: sharedSandboxes()})
	out, err = a.Run(context.Background(), agent.Text("x"))
	if err != nil || out.Text() != "not json" || out.Parts[0].Kind != agent.PartText {
		t.Fatalf("text output: %+v %v", out, err)
	}
}

func TestCodeAgentPassesOnlyDeclaredSecrets(t *testing.T) {
	canary := setCanary(t)
	ctx := withSecrets(secrets.New("API_KEY", "key-123"), secrets.New("OTHER_KEY", "other-456"))
	for lang, src := range map[Lang]string{
		LangJavaScript: `JSON.stringify(env) + " " + JSON.stringify(std.getenviron())`,
		LangPython:     "import os, json\nprint(json.dumps(dict(os.environ)))\n",
	} {
		a, err := CodeAgent(lang, src, &CodeOptions{Secrets: []string{"API_KEY"}, Sandboxes: sharedSandboxes()})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Card().Secrets, []string{"API_KEY"}) {
			t.Fatalf("card secrets %v", a.Card().Secrets)
		}
		out, err := a.Run(ctx, agent.Text(""))
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		got := out.Text()
		if !strings.Contains(got, "key-123") {
			t.Errorf("%s: the declared secret is missing: %s", lang, got)
		}
		if strings.Contains(got, "other-456") || strings.Contains(got, "OTHER_KEY") {
			t.Errorf("%s: an undeclared secret leaked: %s", lang, got)
		}
		if strings.Contains(got, canary) || strings.Contains(got, canaryName) {
			t.Errorf("%s: the server's environment leaked: %s", lang, got)
		}
	}
}

func TestCodeAgentFailsWithoutItsSecret(t *testing.T) {
	t.Parallel()
	a, err := CodeAgent(LangPython, "print(1)", &CodeOptions{Secrets: []string{"API_KEY"}, Sandboxes: sharedSandboxes()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background(), agent.Text("")); err == nil || !strings.Contains(err.Error(), "API_KEY") {
		t.Fatalf("err = %v, want one naming the missing secret", err)
	}
	if _, err := CodeAgent(LangPython, "", &CodeOptions{Secrets: []string{"BAD=NAME"}}); err == nil {
		t.Errorf("a secret name that cannot be a variable was accepted")
	}
}

func TestCodeAgentErrorsCarryNoSecret(t *testing.T) {
	t.Parallel()
	ctx := withSecrets(secrets.New("API_KEY", "sk-very-secret"))
	for lang, src := range map[Lang]string{
		LangJavaScript: `throw new Error("bad key " + env.API_KEY)`,
		LangPython:     "import os, sys\nsys.exit('bad key ' + os.environ['API_KEY'])\n",
	} {
		a, _ := CodeAgent(lang, src, &CodeOptions{Secrets: []string{"API_KEY"}, Sandboxes: sharedSandboxes()})
		_, err := a.Run(ctx, agent.Text(""))
		var ee *ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: err = %v, want *ExitError", lang, err)
		}
		if strings.Contains(err.Error(), "sk-very-secret") || !strings.Contains(err.Error(), secrets.Redacted) {
			t.Errorf("%s: error = %q, want the secret redacted", lang, err)
		}
	}
}

func TestCodeAgentStopsAtLimits(t *testing.T) {
	t.Parallel()
	a, _ := CodeAgent(LangPython, "while True: pass", &CodeOptions{Sandboxes: sharedSandboxes(), Limits: Limits{CPUTime: 500_000_000}})
	_, err := a.Run(context.Background(), agent.Text(""))
	if l, ok := IsLimit(err); !ok || l != LimitCPUTime {
		t.Fatalf("err = %v, want the cpu time limit", err)
	}
}

func TestCodeAgentWithoutSandboxFailsClosed(t *testing.T) {
	t.Parallel()
	_, err := CodeAgent(LangPython, "print(1)", &CodeOptions{Sandboxes: &Sandboxes{Wasm: testSB.wasm}})
	var se *SetupError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want *SetupError", err)
	}
	o, _ := NewOS(&OSOptions{Bwrap: "/nonexistent/bwrap"})
	a, err := CodeAgent(LangPython, "print(1)", &CodeOptions{Sandboxes: &Sandboxes{OS: o}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background(), agent.Text("")); !errors.As(err, &se) {
		t.Fatalf("err = %v, want *SetupError", err)
	}
}

func TestParseLangAndCode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Lang{"js": LangJavaScript, "JavaScript": LangJavaScript, "py": LangPython, "python3": LangPython, "wasm": LangWasm} {
		if got, err := ParseLang(in); err != nil || got != want {
			t.Errorf("ParseLang(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseLang("bash"); err == nil {
		t.Errorf("bash accepted")
	}
	if _, _, err := Code("ruby", nil); err == nil {
		t.Errorf("ruby accepted")
	}
	if k, spec, _ := Code(LangPython, []byte("x")); k != KindOS || spec.Program != PythonPath {
		t.Errorf("python: %s %+v", k, spec)
	}
	if k, spec, _ := Code(LangJavaScript, []byte("x")); k != KindWasm || spec.Program != ProgramJS {
		t.Errorf("javascript: %s %+v", k, spec)
	}
	if _, err := (&Sandboxes{}).For("vm"); err == nil {
		t.Errorf("unknown kind accepted")
	}
}

func TestCodeAgentEgressIsForJavaScriptAndPython(t *testing.T) {
	t.Parallel()
	srv, _ := countingServer(t, `{"from": "server"}`)
	eg := &egress.Options{Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}
	a, err := CodeAgent(LangJavaScript, `fetch(input).then(r => r.json())`, &CodeOptions{Sandboxes: sharedSandboxes(), Egress: eg})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Card(); c.Kind != "wasm" || !c.Has(agent.EffectEgress) || !slices.Equal(c.Egress, []string{"127.0.0.1"}) {
		t.Fatalf("card %+v", c)
	}
	out, err := a.Run(context.Background(), agent.Text(srv.URL))
	if v, _ := out.Value(); err != nil || string(v) != `{"from":"server"}` {
		t.Fatalf("out %s err %v", v, err)
	}
	if _, err := CodeAgent(LangWasm, string(fixtureExit(0)), &CodeOptions{Sandboxes: sharedSandboxes(), Egress: eg}); err == nil || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("a wasm module with egress: %v", err)
	}
}
