package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

func TestExportMutableGlobals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	orig := fixtureCounter() // one mutable global, which _start increments
	mod, names, err := exportMutableGlobals(orig)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != globalExportPrefix+"0" {
		t.Fatalf("names = %q", names)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	inst, err := rt.InstantiateWithConfig(ctx, mod, wazero.NewModuleConfig().WithStartFunctions().WithName(""))
	if err != nil {
		t.Fatalf("the rewritten module does not instantiate: %v", err)
	}
	g, ok := inst.ExportedGlobal(names[0]).(api.MutableGlobal)
	if !ok || g.Get() != 0 {
		t.Fatalf("global %s not exported as mutable (%v)", names[0], inst.ExportedGlobal(names[0]))
	}
	g.Set(41)
	if inst.ExportedFunction("_start") == nil || inst.ExportedMemory("memory") == nil {
		t.Fatal("the module's own exports are gone")
	}
	// _start adds 1 and exits with the global's value.
	_, err = inst.ExportedFunction("_start").Call(ctx)
	if exit := (*sys.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 42 {
		t.Fatalf("_start after Set(41): %v, want exit code 42", err)
	}

	// No mutable global: unchanged.
	plain := fixtureExit(0)
	if out, names, err := exportMutableGlobals(plain); err != nil || names != nil || !bytes.Equal(out, plain) {
		t.Fatalf("module without mutable globals: %d bytes, %q, %v", len(out), names, err)
	}
	// Twice: the names are taken.
	if _, _, err := exportMutableGlobals(mod); err == nil {
		t.Fatal("a module already exporting the names was accepted")
	}
	for _, bad := range [][]byte{nil, []byte("\x00asm\x02\x00\x00\x00"), orig[:len(orig)-3], append(bytes.Clone(orig[:8]), 6, 0x7f)} {
		if _, _, err := exportMutableGlobals(bad); err == nil {
			t.Errorf("malformed module %x accepted", bad)
		}
	}
}

func TestQuickJSRewriteIsPinned(t *testing.T) {
	t.Parallel()
	// The QuickJS module with its globals exported, as the template
	// compiles it: QuickJS has one mutable global, the stack pointer.
	mod, names, err := exportMutableGlobals(qjsModule)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != globalExportPrefix+"0" {
		t.Fatalf("names = %q", names)
	}
	sum := sha256.Sum256(mod)
	if got := hex.EncodeToString(sum[:]); got != "632aef8eadb5d10b46d1fc703be481270effe541a3413412f6c51b83d53b1161" {
		t.Fatalf("the rewritten QuickJS module changed (sha256 %s)", got)
	}
	if len(mod)-len(qjsModule) > 32 {
		t.Fatalf("the rewrite added %d bytes, want one export", len(mod)-len(qjsModule))
	}
}
