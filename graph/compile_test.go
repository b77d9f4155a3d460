package graph_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/graph"
)

func registry() *graph.Registry {
	r := graph.NewRegistry()
	builtin.Register(r)
	return r
}

func compileFile(t *testing.T, path string) (*graph.Graph, error) {
	t.Helper()
	spec, err := graph.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return graph.Compile(spec, registry(), nil)
}

// Each malformed topology fails with an error naming the node and the problem.
func TestValidationErrorsNameNodeAndProblem(t *testing.T) {
	cases := []struct {
		file string
		want []string
	}{
		{"unknown-after.yaml", []string{`node "b"`, `unknown node "nope"`}},
		{"duplicate.yaml", []string{`node "a"`, "duplicate node name"}},
		{"cycle.yaml", []string{"unbounded cycle", "a -> b -> c"}},
		{"unreachable.yaml", []string{`node "orphan"`, "unreachable"}},
		{"barrier.yaml", []string{`node "join"`, "impossible barrier: k=3 but only 2 upstream"}},
		{"kind.yaml", []string{`node "a"`, `unknown agent kind "teleport"`}},
		{"credential.yaml", []string{`node "call"`, "literal credential"}},
		{"unbounded-loop.yaml", []string{`node "review"`, "unbounded cycle: a loop needs max"}},
		{"unknown-key.yaml", []string{"colour"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			_, err := compileFile(t, filepath.Join("testdata", "bad", c.file))
			if err == nil {
				t.Fatal("compiled; want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestAllProblemsFoundInOnePass(t *testing.T) {
	_, err := compileFile(t, filepath.Join("testdata", "bad", "many.yaml"))
	var ve *graph.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	want := map[string]bool{"b": false, "c": false, "d": false}
	for _, p := range ve.Problems {
		if _, ok := want[p.Node]; ok {
			want[p.Node] = true
		}
	}
	for n, seen := range want {
		if !seen {
			t.Errorf("no problem reported for node %q in %v", n, ve)
		}
	}
	if len(ve.Problems) < 4 {
		t.Errorf("want >= 4 problems (unknown after, unknown kind, bad approval, impossible k), got %d: %v", len(ve.Problems), ve)
	}
}

func TestChainDefaultAndExplicitRoot(t *testing.T) {
	spec, err := graph.Parse([]byte(`
name: g
nodes:
  - {name: a, agent: builtin:trim}
  - {name: b, agent: builtin:upper}
  - {name: c, after: [], agent: builtin:lower}
`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Compile(spec, registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := g.Node("b")
	if len(b.Upstream) != 1 || g.Nodes[b.Upstream[0]].Name != "a" {
		t.Fatalf("b should follow a, upstream=%v", b.Upstream)
	}
	if len(g.Roots) != 2 {
		t.Fatalf("roots = %v, want a and c", g.Roots)
	}
}

func TestJSONTopologyIsAccepted(t *testing.T) {
	spec, err := graph.Parse([]byte(`{"name":"j","nodes":[{"name":"a","agent":"builtin:trim","timeout":"2s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Compile(spec, registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := g.Node("a"); n.Timeout.Seconds() != 2 {
		t.Fatalf("timeout = %v", n.Timeout)
	}
}

func TestSecretNamesAreNotValues(t *testing.T) {
	// The second is refused by every secret source (a name starts with a
	// letter or underscore): compiling says so, not the first run.
	for _, name := range []string{"sk-abcdefghijklmnopqrstuvwx", "1PASSWORD_TOKEN"} {
		spec, _ := graph.Parse([]byte(`
name: s
nodes:
  - {name: a, agent: builtin:trim, secrets: ["` + name + `"]}
`))
		_, err := graph.Compile(spec, registry(), nil)
		if err == nil || !strings.Contains(err.Error(), "not a secret name") {
			t.Fatalf("%s: got %v", name, err)
		}
	}
}

func TestRuleOfTwoTable(t *testing.T) {
	spec, _ := graph.Parse([]byte(`
name: r2
nodes:
  - {name: read, agent: builtin:trim, sensitive: true}
  - {name: post, agent: builtin:echo, effects: [egress], egress: [api.example.com]}
`))
	g, err := graph.Compile(spec, registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := g.RuleOfTwo()
	if rows[0].AllThree || !rows[1].AllThree {
		t.Fatalf("rows = %+v", rows)
	}
}
