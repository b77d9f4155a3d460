package sandbox

import (
	"context"
	"testing"
)

// Start-up cost of a trivial code node, per kind. Run with:
//
//	go test -run '^$' -bench . -benchmem ./sandbox/
//
// Warm: the sandbox exists and the module is compiled. Cold: a new sandbox
// per call; for wasm, with the compilation cache on disk (a restarted
// server) or, for JavaScriptColdNoCache, compiling QuickJS from scratch.

func benchRun(b *testing.B, sb Sandbox, spec *Spec) {
	b.Helper()
	ctx := context.Background()
	if _, err := sb.Run(ctx, spec); err != nil { // compile before timing
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := sb.Run(ctx, spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}

func BenchmarkJavaScriptWarm(b *testing.B) {
	benchRun(b, testSB.wasm, JavaScript(`input.n + 1`).withStdin(`{"n": 41}`))
}

func BenchmarkWasmModuleWarm(b *testing.B) {
	benchRun(b, testSB.wasm, WasmModule(emptyCommand()))
}

func BenchmarkJavaScriptCold(b *testing.B) {
	benchCold(b, JavaScript(`input.n + 1`).withStdin(`{"n": 41}`))
}

func BenchmarkWasmModuleCold(b *testing.B) {
	benchCold(b, WasmModule(emptyCommand()))
}

func benchCold(b *testing.B, spec *Spec) {
	ctx := context.Background()
	dir := b.TempDir()
	w, _ := NewWasm(ctx, &WasmOptions{CacheDir: dir})
	if _, err := w.Run(ctx, spec); err != nil { // fill the disk cache
		b.Fatal(err)
	}
	w.Close(ctx)
	for b.Loop() {
		w, err := NewWasm(ctx, &WasmOptions{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Run(ctx, spec); err != nil {
			b.Fatal(err)
		}
		w.Close(ctx)
	}
}

func BenchmarkJavaScriptColdNoCache(b *testing.B) {
	ctx := context.Background()
	spec := JavaScript(`1`)
	for b.Loop() {
		w, _ := NewWasm(ctx, nil)
		if _, err := w.Run(ctx, spec); err != nil {
			b.Fatal(err)
		}
		w.Close(ctx)
	}
}

func BenchmarkOSTrivialProgram(b *testing.B) {
	benchRun(b, testSB.os, &Spec{Program: "/bin/true"})
}

func BenchmarkPythonWarm(b *testing.B) {
	benchRun(b, testSB.os, Python(`import json, sys; print(json.load(sys.stdin)["n"] + 1)`).withStdin(`{"n": 41}`))
}

func BenchmarkPythonCold(b *testing.B) {
	spec := Python(`import json, sys; print(json.load(sys.stdin)["n"] + 1)`).withStdin(`{"n": 41}`)
	ctx := context.Background()
	for b.Loop() {
		o, err := NewOS(nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := o.Run(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
}

func (s *Spec) withStdin(in string) *Spec { s.Stdin = []byte(in); return s }
