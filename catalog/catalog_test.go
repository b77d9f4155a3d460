package catalog_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/topotest"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/sandbox"
	"github.com/babelagent/babel/secrets"
)

// setCanary puts a fresh random canary in this process's environment: no
// node may see it.
func setCanary(t *testing.T) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	v := "canary-" + hex.EncodeToString(b)
	t.Setenv("BABEL_TEST_CANARY", v)
	return v
}

func compile(t *testing.T, reg *graph.Registry, yaml string) (*graph.Graph, error) {
	t.Helper()
	return topotest.Compile(t, reg, yaml, nil)
}

func mustCompile(t *testing.T, reg *graph.Registry, yaml string) *graph.Graph {
	t.Helper()
	return topotest.MustCompile(t, reg, yaml)
}

// runGraph runs g as users do, with the default runner.
func runGraph(t *testing.T, g *graph.Graph, input string) *run.Result {
	t.Helper()
	r, err := run.NewRunner(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := r.Run(ctx, &run.Request{Graph: g, Input: agent.FromJSON(json.RawMessage(input)), Principal: "tester"})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("run %s: %s (trace %+v)", res.Status, res.Error, res.Trace)
	}
	return res
}

func oneNode(agentField string, extra ...string) string {
	return topotest.OneNode("n", agentField, extra...)
}

// The code of each test below reports its result and what it can see of
// the environment: the canary must not be there.
const (
	jsReport = `({doubled: input.n * 2, canary: env.BABEL_TEST_CANARY ?? null, names: Object.keys(env).sort()})`
	pyReport = "import json, os, sys\n" +
		"d = json.load(sys.stdin)\n" +
		"print(json.dumps({'doubled': d['n'] * 2, 'canary': os.environ.get('BABEL_TEST_CANARY'), 'names': sorted(os.environ)}))\n"
)

type report struct {
	Doubled int      `json:"doubled"`
	Canary  *string  `json:"canary"`
	Names   []string `json:"names"`
}

func TestCodeNodesRunInASandboxAndSeeNoUndeclaredEnv(t *testing.T) {
	canary := setCanary(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "code"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"code/double.js": jsReport, "code/double.py": pyReport} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// One registry for every topology: its wasm sandbox (QuickJS) is made
	// once, when the first JavaScript node is compiled.
	reg := catalog.Registry(&catalog.Options{Dir: dir})
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for name, agentField := range map[string]string{
		"js source":     `{code: {lang: js, source: ` + quoted(jsReport) + `}}`,
		"python source": `{code: {lang: python, source: ` + quoted(pyReport) + `}}`,
		"js file":       `{code: {file: code/double.js}}`,
		"python file":   `{code: {lang: py, file: code/double.py}}`,
	} {
		t.Run(name, func(t *testing.T) {
			g := mustCompile(t, reg, oneNode(agentField))
			if c := g.Nodes[0].Card; !c.Has(agent.EffectExec) {
				t.Errorf("card %+v: a code node has the exec effect", c)
			}
			res := runGraph(t, g, `{"n": 21}`)
			raw, err := res.Output.Value()
			if err != nil {
				t.Fatalf("output %+v: %v", res.Output, err)
			}
			var got report
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("output %s: %v", raw, err)
			}
			if got.Doubled != 42 {
				t.Errorf("output %s: want doubled 42", raw)
			}
			if got.Canary != nil || strings.Contains(string(raw), canary) || strings.Contains(string(raw), "BABEL_TEST_CANARY") {
				t.Errorf("the code sees the server's environment: %s", raw)
			}
		})
	}
}

// secretScoper hands a call the declared secrets it holds.
type secretScoper map[string]string

func (s secretScoper) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	var out []secrets.Secret
	for _, n := range names {
		if v, ok := s[n]; ok {
			out = append(out, secrets.New(n, v))
		}
	}
	return agent.NewSecrets(out...), nil
}

func TestCodeNodeSeesItsDeclaredSecretOnly(t *testing.T) {
	canary := setCanary(t)
	reg := catalog.Registry(nil)
	g := mustCompile(t, reg, oneNode(`{code: {lang: python, source: "import json, os; print(json.dumps(dict(os.environ)))"}}`, "secrets: [API_TOKEN]"))
	if c := g.Nodes[0].Card; len(c.Secrets) != 1 || c.Secrets[0] != "API_TOKEN" {
		t.Fatalf("card secrets %v, want [API_TOKEN]", c.Secrets)
	}
	k := kernel.New(&kernel.Options{Secrets: secretScoper{"API_TOKEN": "tok-51c0ffee", "OTHER_SECRET": "other-9a8b7c"}})
	r, err := run.NewRunner(&run.Config{Kernel: k})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := r.Run(ctx, &run.Request{Graph: g, Input: agent.Text("x"), Principal: "tester"})
	if res.Status != run.StatusSucceeded {
		t.Fatalf("run %s: %s", res.Status, res.Error)
	}
	raw, _ := res.Output.Value()
	var env map[string]string
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	// The code got its secret (whose value the kernel redacts from the
	// output), and nothing else of the server's.
	if v, ok := env["API_TOKEN"]; !ok || v == "tok-51c0ffee" {
		t.Errorf("API_TOKEN=%q: want the declared secret present and its value redacted from the output", v)
	}
	for k, v := range env {
		if k == "OTHER_SECRET" || k == "BABEL_TEST_CANARY" || v == canary || v == "other-9a8b7c" {
			t.Errorf("undeclared variable %s reached the code", k)
		}
	}
}

func TestCodeFileNeverResolvesAgainstTheWorkingDirectory(t *testing.T) {
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "planted.js"), []byte(`"from the working directory"`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	_, err := compile(t, catalog.Registry(nil), oneNode(`{code: {file: planted.js}}`))
	if err == nil || !strings.Contains(err.Error(), "never resolved against the working directory") {
		t.Fatalf("compile: %v; want a refusal to read planted.js from the working directory", err)
	}
	// With the topology's directory, the file is read from there.
	dir := t.TempDir()
	_, err = compile(t, catalog.Registry(&catalog.Options{Dir: dir}), oneNode(`{code: {file: planted.js}}`))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("compile: %v; want planted.js looked up in the topology's directory only", err)
	}
}

// nopWasmDir returns a directory holding nop.wasm, the smallest WASI
// command: _start returns at once.
func nopWasmDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	module := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
		0x03, 0x02, 0x01, 0x00,
		0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b,
	}
	if err := os.WriteFile(filepath.Join(dir, "nop.wasm"), module, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWasmCodeNodeFromFile(t *testing.T) {
	dir := nopWasmDir(t)
	g := mustCompile(t, catalog.Registry(&catalog.Options{Dir: dir}), oneNode(`{code: {file: nop.wasm}}`))
	if c := g.Nodes[0].Card; c.Kind != "wasm" {
		t.Errorf("card kind %q, want wasm", c.Kind)
	}
	res := runGraph(t, g, `{}`)
	if res.Output.Text() != "" {
		t.Errorf("output %+v, want nothing", res.Output)
	}
}

func TestBadCodeAndProcessNodesAreLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog"), []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := catalog.Registry(&catalog.Options{Dir: dir})
	for name, tc := range map[string]struct{ agent, want string }{
		"no lang":          {`{code: {source: "1"}}`, "no lang"},
		"unknown lang":     {`{code: {lang: cobol, source: "1"}}`, "unknown code language"},
		"no code":          {`{code: {lang: js}}`, "no code"},
		"source and file":  {`{code: {lang: js, source: "1", file: a.js}}`, "not both"},
		"wasm source":      {`{code: {lang: wasm, source: "AGFzbQ=="}}`, "binary"},
		"empty source":     {`{code: {lang: python, source: "  "}}`, "empty"},
		"unknown key":      {`{code: {lang: js, source: "1", env: {A: b}}}`, "env"},
		"missing file":     {`{code: {file: gone.py}}`, "no such file"},
		"directory":        {`{code: {lang: js, file: .}}`, "not a regular file"},
		"string form":      {`{code: "1 + 1"}`, "want {code:"},
		"no program":       {`{process: {args: [x]}}`, "no program"},
		"not executable":   {`{process: {program: prog}}`, "not executable"},
		"missing program":  {`{process: {program: /usr/bin/no-such-program-here}}`, "no such file"},
		"short form":       {`"process:/usr/bin/true --flag"`, ""},
		"process bad args": {`{process: {program: /usr/bin/true, args: x}}`, "args"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := compile(t, reg, oneNode(tc.agent))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("compile: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "n"`) {
				t.Fatalf("compile: %v; want an error naming the node and saying %q", err, tc.want)
			}
		})
	}
}

func TestProcessNodeRunsInTheOSSandbox(t *testing.T) {
	canary := setCanary(t)
	dir := t.TempDir()
	script := "#!/usr/bin/python3 -I\n" +
		"import json, os, sys\n" +
		"m = json.load(sys.stdin)\n" +
		"seen = [p for p in sys.argv[1:] if os.path.exists(p)]\n" +
		"json.dump({'parts': [{'kind': 'data', 'data': {'text': m['parts'][0]['text'].upper(), 'env': dict(os.environ), 'seen': seen}}], 'labels': []}, sys.stdout)\n"
	if err := os.WriteFile(filepath.Join(dir, "shout.py"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	reg := catalog.Registry(&catalog.Options{Dir: dir})
	for name, agentField := range map[string]string{
		"relative program": `{process: {program: shout.py, args: ["` + dir + `", /etc/passwd]}}`,
		"absolute program": `{process: {program: "` + filepath.Join(dir, "shout.py") + `", args: ["` + dir + `"]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			g := mustCompile(t, reg, oneNode(agentField))
			if c := g.Nodes[0].Card; c.Kind != "process" || !c.Has(agent.EffectExec) {
				t.Errorf("card %+v: want kind process with the exec effect", c)
			}
			res := runGraph(t, g, `"hello"`)
			raw, _ := res.Output.Value()
			var out struct {
				Text string            `json:"text"`
				Env  map[string]string `json:"env"`
				Seen []string          `json:"seen"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("output %s: %v", raw, err)
			}
			if out.Text != "HELLO" {
				t.Errorf("output %s: want HELLO", raw)
			}
			if _, ok := out.Env["BABEL_TEST_CANARY"]; ok || strings.Contains(string(raw), canary) {
				t.Errorf("the program sees the server's environment: %v", out.Env)
			}
			if len(out.Seen) != 0 {
				t.Errorf("the program sees host paths: %v", out.Seen)
			}
		})
	}
}

// Sandboxes given in Options are the only ones used: a kind they lack
// fails closed, with no sandbox made in its place.
func TestGivenSandboxesWithoutAKindFailClosed(t *testing.T) {
	reg := catalog.Registry(&catalog.Options{Sandboxes: &sandbox.Sandboxes{}})
	for _, a := range []string{`{code: {lang: js, source: "1"}}`, `{code: {lang: python, source: "1"}}`, `{process: {program: /usr/bin/true}}`} {
		_, err := compile(t, reg, oneNode(a))
		if err == nil || !strings.Contains(err.Error(), "no sandbox of this kind is configured") {
			t.Errorf("%s: %v; want a refusal naming the missing sandbox", a, err)
		}
	}
	pin := "sha256:" + strings.Repeat("0", 64)
	g := mustCompile(t, reg, oneNode(`"mcp+stdio:/usr/bin/true"`, "with: {tool: t, pin: "+pin+"}"))
	r, _ := run.NewRunner(nil)
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("{}"), Principal: "tester"})
	if res.Status == run.StatusSucceeded || !strings.Contains(res.Error, "only in the os sandbox") {
		t.Errorf("stdio MCP node without an os sandbox: %s %q; want a refusal", res.Status, res.Error)
	}
}
