package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	babelmcp "github.com/babelagent/babel/adapter/mcp"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/topotest"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
)

// testBinary is this test binary: with serverArg it is an MCP stdio server.
func testBinary(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stdioServerFixture is this test binary as a stdio server, started by its
// absolute path as users start theirs. It lies outside /usr, so the sandbox
// gets a copy of it on each start.
type stdioServerFixture struct {
	bin   string
	extra []string // more arguments
}

func newStdioFixture(t testing.TB, extra ...string) *stdioServerFixture {
	t.Helper()
	return &stdioServerFixture{bin: testBinary(t), extra: extra}
}

func (f *stdioServerFixture) args() []string { return append([]string{serverArg}, f.extra...) }

func (f *stdioServerFixture) config() *babelmcp.Config {
	return &babelmcp.Config{Command: f.bin, Args: f.args()}
}

// shortForm is the node's agent field: mcp+stdio:/path args...
func (f *stdioServerFixture) shortForm() string {
	return "mcp+stdio:" + f.bin + " " + strings.Join(f.args(), " ")
}

// rugPull starts servers through the default sandboxed starter, with
// echo's description as it is at the time: the server changes between
// sessions while the node's configuration stays as it was pinned.
type rugPull struct {
	desc atomic.Value
	next babelmcp.Starter
}

func newRugPull(desc string) *rugPull {
	r := &rugPull{next: &babelmcp.SandboxStarter{}}
	r.desc.Store(desc)
	return r
}

func (r *rugPull) Start(ctx context.Context, cmd *babelmcp.Command) (io.ReadWriteCloser, error) {
	c := *cmd
	c.Args = append(slices.Clone(cmd.Args), "--desc", r.desc.Load().(string))
	return r.next.Start(ctx, &c)
}

func pinOf(t testing.TB, cfg *babelmcp.Config) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := babelmcp.Pin(ctx, cfg)
	if err != nil {
		t.Fatalf("Pin: %v", err)
	}
	return d
}

// compileYAML compiles a topology with the mcp kinds registered.
func compileYAML(t testing.TB, yaml string, opts *babelmcp.Options) (*graph.Graph, error) {
	t.Helper()
	reg := graph.NewRegistry()
	babelmcp.Register(reg, opts)
	return topotest.Compile(t, reg, yaml, nil)
}

func mustCompile(t testing.TB, yaml string, opts *babelmcp.Options) *graph.Graph {
	t.Helper()
	g, err := compileYAML(t, yaml, opts)
	if err != nil {
		t.Fatalf("compile: %v\n%s", err, yaml)
	}
	return g
}

// oneNode is a one-node topology; agent is the node's agent field (YAML),
// extra is more of the node's keys, indented by four spaces.
func oneNode(agentField string, extra ...string) string {
	return topotest.OneNode("tool", agentField, extra...)
}

// secretScoper hands a call the declared secrets it holds.
type secretScoper map[string]string

func (s secretScoper) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	var out []secrets.Secret
	for _, n := range names {
		v, ok := s[n]
		if !ok {
			return nil, fmt.Errorf("secret %s not found", n)
		}
		out = append(out, secrets.New(n, v))
	}
	return agent.NewSecrets(out...), nil
}

// runGraph runs g the way users do, with an optional kernel.
func runGraph(t testing.TB, ctx context.Context, g *graph.Graph, input agent.Message, k *kernel.Kernel) *run.Result {
	t.Helper()
	r, err := run.NewRunner(&run.Config{Kernel: k})
	if err != nil {
		t.Fatal(err)
	}
	return r.Run(ctx, &run.Request{Graph: g, Input: input, Principal: "tester"})
}

func runYAML(t testing.TB, yaml string, opts *babelmcp.Options, input string) *run.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return runGraph(t, ctx, mustCompile(t, yaml, opts), agent.FromJSON(json.RawMessage(input)), nil)
}

func wantSucceeded(t testing.TB, res *run.Result) {
	t.Helper()
	if res.Status != run.StatusSucceeded {
		t.Fatalf("run %s: %s (trace %+v)", res.Status, res.Error, res.Trace)
	}
}

func wantFailed(t testing.TB, res *run.Result, substrings ...string) {
	t.Helper()
	if res.Status == run.StatusSucceeded {
		t.Fatalf("run succeeded with %s; want a failure", res.Output.Text())
	}
	for _, s := range substrings {
		if !strings.Contains(res.Error, s) {
			t.Errorf("run error %q does not say %q", res.Error, s)
		}
	}
}

func outputValue(t testing.TB, res *run.Result, v any) {
	t.Helper()
	raw, err := res.Output.Value()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
}
