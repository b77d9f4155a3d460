package kernel_test

import (
	"go/ast"
	"go/types"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// TestOnlyTheKernelCallsAgentRun type-checks the whole module and fails if
// any code but kernel.(*Kernel).execute calls Run on a value whose type is
// an agent.Agent: the scheduler, tool loops, servers and adapters all go
// through kernel.Invoke.
func TestOnlyTheKernelCallsAgentRun(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	var iface *types.Interface
	for _, p := range pkgs {
		if p.PkgPath == "github.com/babelagent/babel/agent" {
			iface = p.Types.Scope().Lookup("Agent").Type().Underlying().(*types.Interface)
		}
	}
	if iface == nil {
		t.Fatal("agent.Agent not found")
	}
	checked := 0
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		for _, f := range p.Syntax {
			name := p.Fset.File(f.Pos()).Name()
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			var fn string
			ast.Inspect(f, func(n ast.Node) bool {
				if d, ok := n.(*ast.FuncDecl); ok {
					fn = p.PkgPath + "." + d.Name.Name
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Run" {
					return true
				}
				recv := p.TypesInfo.TypeOf(sel.X)
				if recv == nil || !(types.Implements(recv, iface) || types.Implements(types.NewPointer(recv), iface)) {
					return true
				}
				checked++
				if fn != "github.com/babelagent/babel/kernel.execute" {
					t.Errorf("%s: %s calls Agent.Run directly; only kernel.Invoke may", p.Fset.Position(call.Pos()), fn)
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("found no Agent.Run call at all: the check is not looking")
	}
}
