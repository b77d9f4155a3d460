package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func babel(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDemoExitsZero(t *testing.T) {
	code, out, errs := babel(t, "", "demo")
	if code != 0 || !strings.Contains(out, "Sorry about the crash") {
		t.Fatalf("code %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

func TestRunJSONShape(t *testing.T) {
	f := writeFile(t, "g.yaml", "name: g\nnodes:\n  - {name: a, agent: builtin:trim}\n  - {name: b, agent: builtin:upper}\n")
	code, out, errs := babel(t, "", "run", f, "--input", "  hi  ", "--json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	var v struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Output any    `json:"output"`
		Trace  []struct {
			Node       string   `json:"node"`
			Status     string   `json:"status"`
			DurationMS *float64 `json:"duration_ms"`
			Attempts   int      `json:"attempts"`
		} `json:"trace"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.RunID == "" || v.Status != "succeeded" || v.Output != "HI" || len(v.Trace) != 2 || v.Trace[1].Attempts != 1 || v.Trace[0].DurationMS == nil {
		t.Fatalf("%+v", v)
	}
}

func TestExitCodes(t *testing.T) {
	fail := writeFile(t, "f.yaml", "name: f\nnodes:\n  - {name: a, agent: builtin:fail}\n")
	if code, _, _ := babel(t, "", "run", fail); code != 1 {
		t.Errorf("failed run: exit %d, want 1", code)
	}
	bad := writeFile(t, "b.yaml", "name: b\nnodes:\n  - {name: a, after: [ghost], agent: builtin:trim}\n")
	code, _, errs := babel(t, "", "validate", bad)
	if code != 2 || !strings.Contains(errs, `node "a"`) || !strings.Contains(errs, `unknown node "ghost"`) {
		t.Errorf("validate: exit %d, stderr %s", code, errs)
	}
	if code, _, _ := babel(t, "", "run", bad); code != 2 {
		t.Errorf("run of an invalid file: exit %d, want 2", code)
	}
	if code, _, _ := babel(t, "", "run", filepath.Join(t.TempDir(), "missing.yaml")); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
	if code, _, _ := babel(t, "", "run"); code != 2 {
		t.Errorf("no file: exit %d, want 2", code)
	}
	if code, _, _ := babel(t, "", "run", fail, "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
}

func TestInputFromStdin(t *testing.T) {
	f := writeFile(t, "g.yaml", "name: g\nnodes:\n  - {name: a, agent: {builtin: {name: jsonpath}}, with: {path: $.who}}\n")
	code, out, errs := babel(t, `{"who": "ada"}`, "run", f, "--input-file", "-")
	if code != 0 || strings.TrimSpace(out) != "ada" {
		t.Fatalf("code %d out %q err %s", code, out, errs)
	}
}

func TestInspectPrintsRuleOfTwo(t *testing.T) {
	f := writeFile(t, "g.yaml", `name: g
nodes:
  - {name: secret, agent: builtin:echo, sensitive: true}
  - {name: post, agent: builtin:echo, effects: [egress], egress: [api.example.com], allow_private: ["127.0.0.1:8080"]}
`)
	code, out, errs := babel(t, "", "inspect", f)
	if code != 0 {
		t.Fatalf("%d %s", code, errs)
	}
	var v struct {
		Nodes []struct {
			Name         string   `json:"name"`
			AllowPrivate []string `json:"allow_private"`
		} `json:"nodes"`
		RuleOfTwo []struct {
			Node     string `json:"node"`
			AllThree bool   `json:"all_three"`
		} `json:"rule_of_two"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.RuleOfTwo) != 2 || !v.RuleOfTwo[1].AllThree || v.Nodes[1].AllowPrivate[0] != "127.0.0.1:8080" {
		t.Fatalf("%s", out)
	}
}
