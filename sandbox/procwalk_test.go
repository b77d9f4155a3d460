package sandbox

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// processStarters are the calls that start a process, by import path.
var processStarters = map[string][]string{
	"os/exec":               {"Command", "CommandContext"},
	"os":                    {"StartProcess"},
	"syscall":               {"Exec", "ForkExec", "StartProcess"},
	"golang.org/x/sys/unix": {"Exec"},
}

// processExceptions are the files outside package sandbox allowed to start
// a process, each with the reason. Nothing a model or a caller supplies
// runs through them.
var processExceptions = map[string]string{
	"secrets/keyring.go":    "runs the operator's keyring tool (secret-tool) with fixed arguments to read a secret",
	"serve/interop_test.go": "test: runs the official JavaScript MCP and A2A clients (node) against the server",
}

// TestOnlySandboxStartsProcesses walks every Go file of the repository and
// fails if one outside the sandbox package starts a process (invariant 8:
// code runs only in a sandbox) or drives QuickJS itself (qjs.New mounts a
// host directory into the guest).
func TestOnlySandboxStartsProcesses(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	sandboxDir := filepath.Join(root, "sandbox") + string(filepath.Separator)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walk: others edit the tree
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasPrefix(path, sandboxDir) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		calls, imports, err := processCalls(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		for _, imp := range imports {
			if imp == "github.com/fastschema/qjs" {
				t.Errorf("%s imports github.com/fastschema/qjs: only package sandbox may run JavaScript", rel)
			}
		}
		if len(calls) == 0 {
			return nil
		}
		if _, ok := processExceptions[rel]; ok {
			seen[rel] = true
			return nil
		}
		t.Errorf("%s starts a process (%s): code runs only through package sandbox; if this is not model- or caller-supplied code, list the file in processExceptions with the reason",
			rel, strings.Join(calls, ", "))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range processExceptions {
		if !seen[f] {
			t.Logf("exception %s no longer starts a process: remove it from processExceptions", f)
		}
	}
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// processCalls lists the process-starting calls in a Go file, and its imports.
func processCalls(path string) (calls, imports []string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, err
	}
	local := map[string]string{} // local name -> import path, for the watched packages
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		imports = append(imports, p)
		if _, ok := processStarters[p]; !ok {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "." {
			calls = append(calls, "dot-import of "+p)
			continue
		}
		local[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		p, ok := local[id.Name]
		if !ok {
			return true
		}
		for _, fn := range processStarters[p] {
			if sel.Sel.Name == fn || (p == "os/exec" && sel.Sel.Name == "Cmd") {
				calls = append(calls, fmt.Sprintf("%s.%s at line %d", id.Name, sel.Sel.Name, fset.Position(sel.Pos()).Line))
				break
			}
		}
		return true
	})
	return calls, imports, nil
}
