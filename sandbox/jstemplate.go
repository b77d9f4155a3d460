package sandbox

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Creating a QuickJS runtime and context (New_QJS: the intrinsics, the std
// and os modules) is most of the cost of a JavaScript call, and compiling
// the harness most of the rest. A jsTemplate does both once per Wasm
// sandbox, in an instance of its own (with the host function bound, see
// jsfetch.go), and keeps that instance's linear memory and mutable globals.
// Each call still gets a fresh instance of the module, into which the
// snapshot is copied: no state passes between calls, only the template's,
// which no call's code ever saw.
//
// Three values in the snapshot must differ per call. The template finds
// where the first two are by creating the runtime with sentinel values and
// looking for them, and refuses to exist unless each is found exactly once:
//
//   - the runtime's heap limit (JSRuntime.malloc_state.malloc_limit), which
//     New_QJS sets from its argument and each call sets from its Limits;
//   - Math.random's state (JSContext.random_state), seeded from the wall
//     clock when the context is created; each call seeds it from
//     crypto/rand, so calls do not share a random sequence.
//
// The third, the monotonic time origin of performance.now
// (JSContext.time_origin), is left alone: the template's monotonic clock
// stands still at templateNanotime and each call's clock starts there.
//
// The template also refuses to exist if creating the runtime read WASI
// randomness, which every call would then share, or wrote any output.
type jsTemplate struct {
	cm      wazero.CompiledModule // the QuickJS module with its mutable globals exported
	memory  []byte                // linear memory once the runtime and the harness exist
	globals []string              // names of the exported mutable globals
	values  []uint64              // and their values
	jctx    uint32                // JSContext*
	limitAt uint32                // address of the heap limit (a 32-bit size_t)
	seedAt  uint32                // address of Math.random's state (uint64)
}

const (
	templateHeapLimit = 0xB4BE1A77 // ~3 GB: large enough not to bind while the template is made
	templateWallSec   = 1234567891
	templateWallNsec  = 987654321
	templateNanotime  = 1 << 40
	// How far past the start of a JSRuntime or JSContext to look for a field.
	templateSearchSpan = 1024
)

// templateSeed is what QuickJS stores as Math.random's first state at the
// template's wall time: gettimeofday in microseconds.
const templateSeed = templateWallSec*1_000_000 + templateWallNsec/1000

// jsTemplateEntry is a template being built, or built: ready closes when
// tpl or err is set.
type jsTemplateEntry struct {
	ready chan struct{}
	tpl   *jsTemplate
	err   error
}

// jsTemplate returns the sandbox's QuickJS template, building it on first
// use. The build runs apart from the call (under the sandbox's life), so
// that a caller giving up does not waste it and the next caller shares it;
// a failed build is retried by the next call.
func (w *Wasm) jsTemplate(ctx context.Context) (*jsTemplate, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, &SetupError{Kind: KindWasm, Reason: "the sandbox is closed"}
	}
	e := w.js
	if e == nil {
		e = &jsTemplateEntry{ready: make(chan struct{})}
		w.js = e
		w.background(e.ready, func() (err error) {
			e.tpl, err = w.buildJSTemplate(w.life)
			return err
		}, func(err error) {
			e.tpl, e.err = nil, err
			if w.js == e {
				w.js = nil
			}
		})
	}
	w.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("sandbox: compile: %w", ctx.Err())
	}
	if e.err != nil {
		var setup *SetupError
		if errors.As(e.err, &setup) {
			return nil, setup
		}
		return nil, &SetupError{Kind: KindWasm, Reason: "QuickJS snapshot: " + e.err.Error(), Err: e.err}
	}
	return e.tpl, nil
}

// buildJSTemplate compiles QuickJS, creates a runtime in a template
// instance and takes the snapshot.
func (w *Wasm) buildJSTemplate(ctx context.Context) (*jsTemplate, error) {
	module, globals, err := exportMutableGlobals(qjsModule)
	if err != nil {
		return nil, err
	}
	cm, err := w.rt.CompileModule(experimental.WithCompilationWorkers(ctx, runtime.GOMAXPROCS(0)), module)
	if err != nil {
		return nil, &SetupError{Kind: KindWasm, Reason: "invalid module: " + err.Error(), Err: err}
	}
	tpl, err := snapshotQuickJS(ctx, w.rt, cm, globals)
	if err != nil {
		_ = cm.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return tpl, nil
}

func snapshotQuickJS(ctx context.Context, rt wazero.Runtime, cm wazero.CompiledModule, globals []string) (*jsTemplate, error) {
	var out bytes.Buffer
	rnd := &watchedRandom{}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(&out).
		WithStderr(&out).
		WithWalltime(func() (int64, int32) { return templateWallSec, templateWallNsec }, 1).
		WithNanotime(func() int64 { return templateNanotime }, 1).
		WithRandSource(rnd)
	mod, err := rt.InstantiateModule(ctx, cm, cfg)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	q := &qjsCall{ctx: ctx, mod: mod}
	p := uint32(q.call("New_QJS", templateHeapLimit, 0, 0, 0))
	if q.err != nil {
		return nil, fmt.Errorf("New_QJS: %w", q.err)
	}
	if p == 0 {
		return nil, errors.New("New_QJS failed")
	}
	mem := mod.Memory()
	jsrt, ok1 := mem.ReadUint32Le(p)
	jctx, ok2 := mem.ReadUint32Le(p + 4)
	if !ok1 || !ok2 || uint32(q.call("QJS_GetContext", uint64(p))) != jctx || q.err != nil {
		return nil, errors.New("unexpected QJSRuntime layout")
	}
	// The host function, for the harness to take.
	fn := q.call("QJS_CreateFunctionProxy", uint64(jctx), jsHostFunction, 0, 0)
	global := q.call("JS_GetGlobalObject", uint64(jctx))
	hostName := q.cstring("__babel_host")
	q.call("JS_SetPropertyStr", uint64(jctx), global, hostName, fn) // takes fn
	q.call("QJS_FreeValue", uint64(jctx), global)
	q.call("free", hostName)
	if q.err == nil && uint32(q.call("JS_HasException", uint64(jctx))) != 0 {
		msg := q.toString(uint64(jctx), q.call("JS_GetException", uint64(jctx)))
		return nil, fmt.Errorf("the host function: %s", msg)
	}
	// The harness, compiled once: each call only calls it.
	code, file := q.cstring(jsHarness), q.cstring("<harness>")
	opts := q.call("QJS_CreateEvalOption", code, 0, 0, file, 0)
	val := q.call("QJS_Eval", uint64(jctx), opts)
	if q.err == nil && uint32(q.call("JS_HasException", uint64(jctx))) != 0 {
		msg := q.toString(uint64(jctx), q.call("JS_GetException", uint64(jctx)))
		return nil, fmt.Errorf("the harness: %s", msg)
	}
	q.call("QJS_FreeValue", uint64(jctx), val)
	for _, p := range []uint64{opts, file, code} {
		q.call("free", p)
	}
	if q.err != nil {
		return nil, fmt.Errorf("the harness: %w", q.err)
	}
	if rnd.read.Load() {
		return nil, errors.New("creating the runtime read random bytes, which every call would share")
	}
	if out.Len() > 0 {
		return nil, fmt.Errorf("creating the runtime wrote output: %q", tail(out.Bytes(), 200))
	}
	snap, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, errors.New("cannot read the linear memory")
	}
	tpl := &jsTemplate{cm: cm, memory: bytes.Clone(snap), globals: globals, jctx: jctx}
	var err1, err2 error
	tpl.limitAt, err1 = findOnce(tpl.memory, jsrt, binary.LittleEndian.AppendUint32(nil, templateHeapLimit), "the heap limit")
	tpl.seedAt, err2 = findOnce(tpl.memory, jctx, binary.LittleEndian.AppendUint64(nil, templateSeed), "Math.random's state")
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	for _, name := range globals {
		g := mod.ExportedGlobal(name)
		if g == nil {
			return nil, fmt.Errorf("global %s is not exported", name)
		}
		tpl.values = append(tpl.values, g.Get())
	}
	return tpl, nil
}

// findOnce returns the address of the one occurrence of want in the
// templateSearchSpan bytes of mem from base, at a 4-byte boundary.
func findOnce(mem []byte, base uint32, want []byte, what string) (uint32, error) {
	end := min(uint64(base)+templateSearchSpan, uint64(len(mem)))
	found, n := uint32(0), 0
	for a := uint64(base) &^ 3; a+uint64(len(want)) <= end; a += 4 {
		if bytes.Equal(mem[a:a+uint64(len(want))], want) {
			found, n = uint32(a), n+1
		}
	}
	if n != 1 {
		return 0, fmt.Errorf("%s found %d times, want once", what, n)
	}
	return found, nil
}

// watchedRandom gives zeros and records that it was read.
type watchedRandom struct{ read atomic.Bool }

func (r *watchedRandom) Read(p []byte) (int, error) {
	r.read.Store(true)
	clear(p)
	return len(p), nil
}

// restore makes mod, a fresh instance of t.cm, what the template instance
// was once its runtime existed, with heap as the runtime's heap limit and
// a fresh Math.random seed. It grows the linear memory to the snapshot's
// size, which the instance's memory cap may refuse.
func (t *jsTemplate) restore(mod api.Module, heap uint32) error {
	mem := mod.Memory()
	if size := uint32(len(t.memory)); mem.Size() < size {
		if _, ok := mem.Grow((size - mem.Size()) / wasmPage); !ok {
			return &LimitError{Limit: LimitMemory}
		}
	}
	if !mem.Write(0, t.memory) {
		return errors.New("quickjs: the snapshot does not fit the linear memory")
	}
	for i, name := range t.globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("quickjs: global %s is not mutable", name)
		}
		g.Set(t.values[i])
	}
	var seed [8]byte
	for binary.LittleEndian.Uint64(seed[:]) == 0 { // xorshift needs a non-zero state
		if _, err := crand.Read(seed[:]); err != nil {
			return fmt.Errorf("quickjs: seed: %w", err)
		}
	}
	if !mem.WriteUint32Le(t.limitAt, heap) || !mem.Write(t.seedAt, seed[:]) {
		return errors.New("quickjs: cannot write the per-call state")
	}
	return nil
}
