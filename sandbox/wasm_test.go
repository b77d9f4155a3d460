package sandbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func runWasm(t *testing.T, spec *Spec) (*Result, error) {
	t.Helper()
	return testSB.wasm.Run(context.Background(), spec)
}

func TestWasmRunsWASICommand(t *testing.T) {
	t.Parallel()
	spec := WasmModule(fixtureEcho())
	spec.Stdin = []byte("hello from stdin")
	res, err := runWasm(t, spec)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hello from stdin" {
		t.Fatalf("res %+v, err %v", res, err)
	}
	res, err = runWasm(t, WasmModule(fixtureExit(42)))
	if err != nil || res.ExitCode != 42 {
		t.Fatalf("exit code: res %+v, err %v", res, err)
	}
}

func TestWasmModuleSeesOnlyDeclaredEnvironment(t *testing.T) {
	setCanary(t)
	spec := WasmModule(fixtureEnv())
	spec.Env = map[string]string{"DECLARED": "yes"}
	res, err := runWasm(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	assertNoCanary(t, "wasm env", res.Stdout)
	if string(res.Stdout) != "DECLARED=yes\x00" {
		t.Fatalf("environment = %q, want only the declared variable", res.Stdout)
	}
}

func TestWasmModuleHasNoFileSystem(t *testing.T) {
	t.Parallel()
	host := filepath.Join(t.TempDir(), "store.db")
	if err := os.WriteFile(host, []byte("private"), 0o644); err != nil {
		t.Fatal(err)
	}
	const ebadf = 8 // WASI errno: no such descriptor
	for _, c := range []struct {
		path   string
		oflags int32
	}{
		{"/etc/shadow", 0}, {"../../go.mod", 0}, {"go.mod", 0}, {host, 0}, {".", 0},
		{"written", 1}, {"/tmp/written", 1}, {"../written", 1},
	} {
		res, err := runWasm(t, WasmModule(fixtureOpen(c.path, c.oflags)))
		if err != nil {
			t.Fatal(err)
		}
		// fd 3 would be the first preopened directory: there is none, so
		// there is nothing to open a path against.
		if prestat, open := res.ExitCode/100, res.ExitCode%100; prestat != ebadf || open == 0 {
			t.Errorf("%s: fd_prestat_get errno %d, path_open errno %d: want %d and a failure", c.path, prestat, open, ebadf)
		}
	}
}

func TestWasmModuleHasNoSocket(t *testing.T) {
	t.Parallel()
	res, err := runWasm(t, WasmModule(fixtureSock()))
	if err != nil || res.ExitCode != 8 {
		t.Fatalf("sock_accept: res %+v, err %v (want EBADF: no socket)", res, err)
	}
}

func TestWasmFreshInstancePerCall(t *testing.T) {
	t.Parallel()
	for i := 0; i < 3; i++ {
		res, err := runWasm(t, WasmModule(fixtureCounter()))
		if err != nil || res.ExitCode != 1 {
			t.Fatalf("call %d: counter = %d (err %v): an instance was reused", i, res.ExitCode, err)
		}
	}
}

func TestWasmCachesCompiledModules(t *testing.T) {
	t.Parallel()
	mod := fixtureExit(3)
	for i := 0; i < 2; i++ {
		if _, err := runWasm(t, WasmModule(mod)); err != nil {
			t.Fatal(err)
		}
	}
	testSB.wasm.mu.Lock()
	e, ok := testSB.wasm.compiled[sha256.Sum256(mod)]
	testSB.wasm.mu.Unlock()
	if !ok || e.cm == nil {
		t.Fatalf("the compiled module is not cached by digest")
	}
	// A full cache compiles for the call only.
	w, err := NewWasm(context.Background(), &WasmOptions{MaxCachedModules: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	for _, m := range [][]byte{fixtureExit(1), fixtureExit(2), fixtureExit(2)} {
		res, err := w.Run(context.Background(), WasmModule(m))
		if err != nil || res.ExitCode == 0 {
			t.Fatalf("res %+v err %v", res, err)
		}
	}
	if len(w.compiled) != 1 {
		t.Fatalf("cache holds %d modules, want 1", len(w.compiled))
	}
}

func TestWasmOnDiskCompilationCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		w, err := NewWasm(context.Background(), &WasmOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		res, err := w.Run(context.Background(), WasmModule(fixtureExit(5)))
		w.Close(context.Background())
		if err != nil || res.ExitCode != 5 {
			t.Fatalf("res %+v err %v", res, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) == 0 {
		t.Fatalf("nothing cached on disk")
	}
}

func TestWasmLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		mod   []byte
		lim   Limits
		limit string
	}{
		{"infinite loop", fixtureLoop(), Limits{CPUTime: 300 * time.Millisecond, WallClock: 5 * time.Second}, LimitCPUTime},
		{"infinite loop, wall clock", fixtureLoop(), Limits{WallClock: 300 * time.Millisecond}, LimitWallClock},
		{"memory bomb", fixtureMemoryBomb(), Limits{Memory: 32 << 20}, LimitMemory},
		{"memory it starts with", fixtureBigMemory(1024), Limits{Memory: 32 << 20}, LimitMemory},
		{"huge output", fixtureFlood(), Limits{Output: 64 << 10}, LimitOutput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := WasmModule(c.mod)
			spec.Limits = c.lim
			start := time.Now()
			res, err := runWasm(t, spec)
			wantLimit(t, err, c.limit)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("stopped after %v", d)
			}
			if c.limit == LimitOutput && int64(len(res.Stdout)) != c.lim.Output {
				t.Errorf("stdout holds %d bytes, want the cap %d", len(res.Stdout), c.lim.Output)
			}
		})
	}
}

func TestWasmCancelStopsWithinASecond(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var cancelledAt time.Time
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancelledAt = time.Now()
		cancel()
	}()
	_, err := testSB.wasm.Run(ctx, WasmModule(fixtureLoop()))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(cancelledAt); d > time.Second {
		t.Fatalf("returned %v after cancel", d)
	}
}

func TestWasmRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, err := runWasm(t, WasmModule([]byte("not wasm")))
	var se *SetupError
	if !errors.As(err, &se) {
		t.Errorf("garbage module: err = %v, want *SetupError", err)
	}
	for _, spec := range []*Spec{
		nil, {}, {Program: "/usr/bin/python3", Code: []byte("x")},
		{Code: fixtureExit(0), Files: []File{{Name: "a"}}},
		{Code: fixtureExit(0), Env: map[string]string{"": "x"}},
	} {
		if _, err := runWasm(t, spec); err == nil {
			t.Errorf("spec %+v accepted", spec)
		}
	}
	// A module importing what the sandbox does not provide cannot start.
	imp := (&wasmModule{
		types:   [][2][]byte{{{}, {}}},
		imports: []wasmImport{{"wasi_snapshot_preview1", "sock_connect", 0}, {"host", "exec", 0}},
		funcs:   []wasmFunc{{typ: 0}},
		memMin:  1,
	}).bytes()
	if _, err := runWasm(t, WasmModule(imp)); !errors.As(err, &se) {
		t.Errorf("module with unknown imports: err = %v, want *SetupError", err)
	}
	// A module with no _start is not a command.
	noStart := (&wasmModule{types: [][2][]byte{{{}, {}}}, funcs: []wasmFunc{{typ: 0}}, memMin: 1}).bytes()
	noStart = append([]byte(nil), noStart...)
	if _, err := runWasm(t, WasmModule(renameExport(noStart))); !errors.As(err, &se) {
		t.Errorf("module without _start: err = %v", err)
	}
}

// renameExport turns the fixture's "_start" export into "_other".
func renameExport(mod []byte) []byte {
	out := append([]byte(nil), mod...)
	for i := 0; i+6 <= len(out); i++ {
		if string(out[i:i+6]) == "_start" {
			copy(out[i:], "_other")
		}
	}
	return out
}
