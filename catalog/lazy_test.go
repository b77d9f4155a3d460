package catalog

import (
	"context"
	"testing"

	"github.com/babelagent/babel/sandbox"
)

func TestSandboxesAreMadeOncePerKindOnFirstUse(t *testing.T) {
	t.Parallel()
	l := &lazySandboxes{}
	if _, err := l.osSandbox(); err != nil {
		t.Fatal(err)
	}
	if l.wasm != nil {
		t.Fatal("asking for the os sandbox made the wasm runtime")
	}
	a, err := l.forKind(sandbox.KindWasm)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Wasm.Close(context.Background())
	b, _ := l.forKind(sandbox.KindWasm)
	o1, _ := l.osSandbox()
	o2, _ := l.osSandbox()
	if a.Wasm == nil || a.Wasm != b.Wasm || o1 != o2 {
		t.Fatalf("each kind must be made once and shared: wasm %p %p, os %p %p", a.Wasm, b.Wasm, o1, o2)
	}
}
