package process_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/babelagent/babel/adapter/process"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/sandbox"
	"github.com/babelagent/babel/secrets"
)

// shout is a message program: it upper-cases the text of the message it
// reads, and reports its environment and what it can see of the host in the
// metadata.
const shout = `#!/usr/bin/python3 -I
import json, os, sys
msg = json.load(sys.stdin)
text = " ".join(p.get("text", "") for p in msg["parts"])
seen = [p for p in sys.argv[1:] if os.path.exists(p)]
json.dump({"parts": [{"kind": "text", "text": text.upper()}],
           "metadata": {"env": dict(os.environ), "seen": seen, "args": sys.argv[1:]},
           "labels": []}, sys.stdout)
`

func writeProgram(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "shout.py")
	if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

func token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestProcessAgentRunsProgramInSandbox(t *testing.T) {
	canary := "canary-" + token()
	t.Setenv("BABEL_TEST_CANARY", canary)
	prog := writeProgram(t, shout)
	a, err := process.New("shout", prog, &process.Options{
		Secrets: []string{"API_KEY"},
		Args:    []string{prog, filepath.Dir(prog), "/etc/shadow"},
	})
	if err != nil {
		t.Fatal(err)
	}
	card := a.Card()
	if card.Kind != "process" || !card.Has(agent.EffectExec) || len(card.Secrets) != 1 {
		t.Fatalf("card %+v", card)
	}
	ctx := agent.WithSecrets(context.Background(), agent.NewSecrets(secrets.New("API_KEY", "k-1"), secrets.New("OTHER", "o-2")))
	in := agent.Text("hello").WithLabels(agent.Labels(0).With(agent.Untrusted))
	out, err := a.Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text() != "HELLO" {
		t.Fatalf("output %q", out.Text())
	}
	if !out.Labels.Has(agent.Untrusted) {
		t.Errorf("the program dropped its input's labels")
	}
	env, _ := out.Metadata["env"].(map[string]any)
	if env["API_KEY"] != "k-1" {
		t.Errorf("declared secret missing: %v", env)
	}
	for k, v := range env {
		if k == "OTHER" || k == "BABEL_TEST_CANARY" || v == canary || v == "o-2" {
			t.Errorf("leaked into the program's environment: %s=%v", k, v)
		}
	}
	if seen, _ := out.Metadata["seen"].([]any); len(seen) != 0 {
		t.Errorf("the program saw host paths: %v", seen)
	}
}

func TestProcessAgentFailures(t *testing.T) {
	t.Parallel()
	ctx := agent.WithSecrets(context.Background(), agent.NewSecrets(secrets.New("API_KEY", "sk-hidden")))
	for name, body := range map[string]string{
		"exit":     "#!/bin/sh\necho \"failed with $API_KEY\" >&2\nexit 3\n",
		"not json": "#!/bin/sh\necho hello\n",
		"two":      "#!/bin/sh\necho '{\"parts\":[]}{\"parts\":[]}'\n",
		"bad part": "#!/bin/sh\necho '{\"parts\":[{\"kind\":\"video\"}]}'\n",
		"unknown":  "#!/bin/sh\necho '{\"parts\":[],\"admin\":true}'\n",
	} {
		a, err := process.New(name, writeProgram(t, body), &process.Options{Secrets: []string{"API_KEY"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Run(ctx, agent.Text("x"))
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.Contains(err.Error(), "sk-hidden") {
			t.Errorf("%s: the error carries the secret: %v", name, err)
		}
		var ee *sandbox.ExitError
		if name == "exit" && (!errors.As(err, &ee) || ee.Code != 3) {
			t.Errorf("exit: err = %v, want *sandbox.ExitError with status 3", err)
		}
	}
}

func TestProcessAgentFailsClosedWithoutSandbox(t *testing.T) {
	t.Parallel()
	proof := filepath.Join(t.TempDir(), "ran-on-host")
	o, err := sandbox.NewOS(&sandbox.OSOptions{Bwrap: "/nonexistent/bwrap"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := process.New("touch", "/usr/bin/touch", &process.Options{Args: []string{proof}, Sandbox: o})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(context.Background(), agent.Text("x"))
	var se *sandbox.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want *sandbox.SetupError", err)
	}
	if _, err := os.Stat(proof); err == nil {
		t.Fatalf("the program ran on the host")
	}
}

func TestProcessAgentNeedsItsSecrets(t *testing.T) {
	t.Parallel()
	a, _ := process.New("p", writeProgram(t, shout), &process.Options{Secrets: []string{"API_KEY"}})
	if _, err := a.Run(context.Background(), agent.Text("x")); err == nil || !strings.Contains(err.Error(), "API_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewRefusesBadPrograms(t *testing.T) {
	t.Parallel()
	for _, prog := range []string{"", "relative/prog", "/nonexistent/prog"} {
		if _, err := process.New("p", prog, nil); err == nil {
			t.Errorf("%q accepted", prog)
		}
	}
	if _, err := process.New("", "/usr/bin/true", nil); err == nil {
		t.Errorf("empty name accepted")
	}
}
