package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The official JavaScript clients (the MCP TypeScript SDK and the A2A JS
// SDK, pinned in interop/package-lock.json) against a live server. They
// are installed by `npm ci --prefix interop`; without them these tests
// fail rather than skip, so CI cannot pass without running them.

type jsEnv struct {
	node string
	dir  string
}

func interopEnv(t *testing.T) jsEnv {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"@modelcontextprotocol/sdk", "@a2a-js/sdk"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("the JS interop clients are not installed (%s missing): run `npm ci --prefix interop` from the repository root", pkg)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (20 or later) is needed for the interop tests: %v", err)
	}
	return jsEnv{node: node, dir: dir}
}

// run runs an interop script and decodes the JSON it prints.
func (js jsEnv) run(t *testing.T, extraEnv []string, script string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, js.node, append([]string{script}, args...)...)
	cmd.Dir = js.dir
	// Only what node needs, never the test's whole environment.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NODE_NO_WARNINGS=1"}, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.String(), stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node %s printed no JSON: %v\n%s\nstderr: %s", script, err, stdout.String(), stderr.String())
	}
	return out
}

func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func TestInteropTypeScriptMCPClientOverHTTP(t *testing.T) {
	js := interopEnv(t)
	ts := startServer(t, serverSetup{}, "pipeline", "leaky")
	out := js.run(t, nil, "mcp-http.mjs", ts.base, aliceToken)

	tools, _ := out["tools"].([]any)
	if len(tools) != 2 {
		t.Fatalf("tools: %v", out["tools"])
	}
	for _, tl := range tools {
		if get(tl, "name") == "pipeline" {
			if get(tl, "inputSchema", "properties", "input", "type") != "string" || get(tl, "annotations", "readOnlyHint") != true {
				t.Errorf("pipeline tool as the TS client sees it: %v", tl)
			}
		}
	}
	call := out["call"]
	if get(call, "isError") == true || get(call, "structuredContent", "status") != "succeeded" ||
		get(call, "structuredContent", "output") != "FROM TYPESCRIPT" || get(call, "structuredContent", "principal") != "token:alice" {
		t.Errorf("call: %v", call)
	}
	if txt, _ := get(call, "content", 0, "text").(string); !strings.Contains(txt, "FROM TYPESCRIPT") {
		t.Errorf("text summary: %q", txt)
	}
	leaky, _ := json.Marshal(out["leaky"])
	if get(out["leaky"], "isError") != true || strings.Contains(string(leaky), "SENSITIVE_INTERNAL_PATH") {
		t.Errorf("leaky: %s", leaky)
	}
	// Arguments that do not fit are refused with a message naming "input".
	bad := string(mustJSON(out["bad"]))
	if !strings.Contains(bad, "input") || (get(out["bad"], "isError") != true && get(out["bad"], "thrown") == nil) {
		t.Errorf("bad arguments: %s", bad)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestInteropTypeScriptMCPClientOverStdio(t *testing.T) {
	js := interopEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := filepath.Abs(filepath.Join("testdata", "graphs", "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The TS client starts this test binary, which serves as `babel mcp` does.
	out := js.run(t, []string{envStdioGraphs + "=" + graphs}, "mcp-stdio.mjs", self)
	if names, _ := out["tools"].([]any); len(names) != 1 || names[0] != "pipeline" {
		t.Errorf("tools: %v", out["tools"])
	}
	call := out["call"]
	if get(call, "isError") == true || get(call, "structuredContent", "output") != "OVER STDIO" ||
		get(call, "structuredContent", "principal") != "local:interop" {
		t.Errorf("call: %v", call)
	}
}

func TestInteropJavaScriptA2AClient(t *testing.T) {
	js := interopEnv(t)
	ts := startServer(t, serverSetup{}, "pipeline", "leaky", "nap")
	out := js.run(t, nil, "a2a.mjs", ts.base, aliceToken)
	sent, task := out["sent"], out["task"]
	if get(sent, "status", "state") != "TASK_STATE_COMPLETED" || get(sent, "artifacts", 0, "parts", 0, "text") != "FROM JAVASCRIPT" {
		t.Errorf("sendMessage: %v", sent)
	}
	if get(task, "id") != get(sent, "id") || get(task, "status", "state") != "TASK_STATE_COMPLETED" {
		t.Errorf("getTask: %v", task)
	}
	// The task is alice's run.
	id, _ := get(task, "id").(string)
	if code, _, b := ts.do("GET", "/v1/runs/"+id, aliceToken, nil); code != 200 || decodeRun(t, b).Principal != "token:alice" {
		t.Errorf("the task as a run: %d %s", code, b)
	}
	events, _ := out["events"].([]any)
	if len(events) < 3 || !strings.Contains(string(mustJSON(events)), "node nap finished") ||
		!strings.Contains(string(mustJSON(events[len(events)-1])), "TASK_STATE_COMPLETED") ||
		!strings.Contains(string(mustJSON(events)), "STREAMED") {
		t.Errorf("stream: %s", mustJSON(events))
	}
	if m, _ := out["missing"].(string); !strings.Contains(strings.ToLower(m), "not found") {
		t.Errorf("getTask of an unknown task: %v", out["missing"])
	}
}
