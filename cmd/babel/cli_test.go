package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
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

// TestMain gives every test its own home: the CLI keeps its store and audit
// log under the user's data directory, never the working directory.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "babel-cli-home")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("XDG_DATA_HOME")
	os.Unsetenv("XDG_CONFIG_HOME")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

func TestApproveFromTheCLIResumesTheRunOnce(t *testing.T) {
	f := writeFile(t, "a.yaml", `name: publish
nodes:
  - {name: draft, agent: builtin:upper}
  - {name: publish, agent: builtin:echo, effects: [write], approval: required}
`)
	code, out, errs := babel(t, "", "run", f, "--input", "release notes", "--json")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (awaiting approval): %s %s", code, out, errs)
	}
	var res struct {
		RunID     string   `json:"run_id"`
		Status    string   `json:"status"`
		Approvals []string `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != "awaiting_approval" || len(res.Approvals) != 1 {
		t.Fatalf("%v %s", err, out)
	}
	id := res.Approvals[0]
	code, out, _ = babel(t, "", "approvals", "show", id)
	var a struct {
		Node   string          `json:"node"`
		Args   json.RawMessage `json:"args"`
		Digest string          `json:"digest"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a.Node != "publish" || string(a.Args) != `"RELEASE NOTES"` {
		t.Fatalf("show: %d %s", code, out)
	}
	if code, _, errs := babel(t, "", "approvals", "approve", id); code != 2 || !strings.Contains(errs, a.Digest) {
		t.Fatalf("approve without the digest: exit %d %s", code, errs)
	}
	if code, _, errs := babel(t, "", "approvals", "approve", id, "--digest", "sha256:other"); code != 3 || !strings.Contains(errs, "stale") {
		t.Fatalf("approve with a digest never shown: exit %d %s", code, errs)
	}
	code, out, errs = babel(t, "", "approvals", "approve", id, "--digest", a.Digest)
	if code != 0 || strings.TrimSpace(out) != "RELEASE NOTES" {
		t.Fatalf("approve: exit %d out %q err %s", code, out, errs)
	}
	if code, _, _ := babel(t, "", "approvals", "approve", id, "--digest", a.Digest); code != 3 {
		t.Fatalf("a second approval of a consumed request: exit %d", code)
	}
	code, out, _ = babel(t, "", "runs", "replay", res.RunID)
	if code != 0 || !strings.Contains(out, `"approval.requested"`) || !strings.Contains(out, `"approval.consumed"`) {
		t.Fatalf("replay: %d %s", code, out)
	}
	if code, out, errs := babel(t, "", "audit", "verify"); code != 0 || !strings.HasPrefix(out, "ok:") {
		t.Fatalf("verify: %d %s %s", code, out, errs)
	}
}

func TestKillSwitchFromTheCLI(t *testing.T) {
	f := writeFile(t, "k.yaml", "name: k\nnodes:\n  - {name: a, agent: builtin:echo}\n")
	if code, _, errs := babel(t, "", "kill", "--all"); code != 0 {
		t.Fatalf("kill: %d %s", code, errs)
	}
	code, _, _ := babel(t, "", "run", f, "--input", "x")
	babel(t, "", "kill", "--release")
	if code != 3 {
		t.Fatalf("run while killed: exit %d, want 3 (denied)", code)
	}
	if code, _, _ := babel(t, "", "run", f, "--input", "x"); code != 0 {
		t.Fatalf("run after release: exit %d", code)
	}
}

func TestAuditVerifyNamesTheFirstTamperedRecord(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	f := writeFile(t, "g.yaml", "name: g\nnodes:\n  - {name: a, agent: builtin:trim}\n  - {name: b, agent: builtin:upper}\n")
	if code, _, errs := babel(t, "", "run", f, "--input", "x"); code != 0 {
		t.Fatal(errs)
	}
	if code, out, _ := babel(t, "", "audit", "verify"); code != 0 {
		t.Fatalf("clean log: %d %s", code, out)
	}
	db, err := sql.Open("sqlite", filepath.Join(home, ".local", "share", "babel", "audit", "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	// An attacker with the file drops the append-only trigger first.
	if _, err := db.Exec(`DROP TRIGGER records_append_only_update; UPDATE records SET principal='someone-else' WHERE seq=2`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, _, errs := babel(t, "", "audit", "verify")
	if code != 1 || !strings.Contains(errs, "seq 2") {
		t.Fatalf("tampered log: exit %d %s", code, errs)
	}
}

func TestInspectShowsToolsInTheRuleOfTwoTable(t *testing.T) {
	f := writeFile(t, "r.yaml", `name: r
nodes:
  - {name: secret, agent: builtin:echo, sensitive: true}
  - {name: ask, agent: builtin:echo, tools: [post]}
tools:
  - {name: post, agent: builtin:echo, effects: [egress], egress: [api.example.com]}
`)
	code, out, errs := babel(t, "", "inspect", f)
	if code != 0 {
		t.Fatal(errs)
	}
	var v struct {
		Nodes []struct {
			Name  string   `json:"name"`
			Tools []string `json:"tools"`
		} `json:"nodes"`
		Tools     []struct{ Name string } `json:"tools"`
		RuleOfTwo []struct {
			Node     string `json:"node"`
			Tool     bool   `json:"tool"`
			AllThree bool   `json:"all_three"`
		} `json:"rule_of_two"`
	}
	json.Unmarshal([]byte(out), &v)
	if len(v.Tools) != 1 || v.Tools[0].Name != "post" || len(v.Nodes[1].Tools) != 1 {
		t.Fatalf("%s", out)
	}
	last := v.RuleOfTwo[len(v.RuleOfTwo)-1]
	if last.Node != "post" || !last.Tool || !last.AllThree {
		t.Fatalf("the tool's row: %+v", last)
	}
}
