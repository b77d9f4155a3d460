package sandbox

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

const wasmPage = 64 << 10

// WasmOptions configures a Wasm sandbox. Nil means the defaults.
type WasmOptions struct {
	// CacheDir, when set, keeps compiled modules on disk across restarts
	// (wazero's compilation cache), so a cold start skips compilation.
	// Empty: an in-memory cache.
	CacheDir string
	// MaxCachedModules bounds the compiled modules kept in memory, by
	// digest. Zero means 32.
	MaxCachedModules int
}

// Wasm is the WebAssembly sandbox (kind "wasm"). Each Run gets a fresh module
// instance; compiled modules are shared between runs. A Wasm is safe for
// concurrent use; Close releases it.
type Wasm struct {
	rt       wazero.Runtime
	maxCache int
	// life ends at Close; compilations run under it, not under the context
	// of the call that asked first.
	life      context.Context
	stop      context.CancelFunc
	compiling sync.WaitGroup // compilations in progress, which Close awaits

	mu       sync.Mutex
	closed   bool
	compiled map[[32]byte]*compiledEntry

	js *jsTemplateEntry // QuickJS's snapshot, once a JavaScript call asked for it
}

type compiledEntry struct {
	ready chan struct{}
	cm    wazero.CompiledModule
	err   error
}

// NewWasm returns a Wasm sandbox.
func NewWasm(ctx context.Context, opts *WasmOptions) (*Wasm, error) {
	if opts == nil {
		opts = &WasmOptions{}
	}
	cache := wazero.NewCompilationCache()
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, &SetupError{Kind: KindWasm, Reason: "compilation cache: " + err.Error(), Err: err}
		}
		cache = c
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		// The call's context closes the instance when it is done: a guest
		// spinning in a loop is stopped at its deadline.
		WithCloseOnContextDone(true)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, &SetupError{Kind: KindWasm, Reason: "wasi: " + err.Error(), Err: err}
	}
	// QuickJS imports env.jsFunctionProxy to call Go functions bound to
	// JavaScript ones: only fetch, for a call that declares egress.
	if _, err := rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(jsHostCall), []api.ValueType{api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}).
		Export("jsFunctionProxy").
		Instantiate(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, &SetupError{Kind: KindWasm, Reason: "host module: " + err.Error(), Err: err}
	}
	maxCache := opts.MaxCachedModules
	if maxCache <= 0 {
		maxCache = 32
	}
	life, stop := context.WithCancel(context.Background())
	return &Wasm{rt: rt, maxCache: maxCache, life: life, stop: stop, compiled: make(map[[32]byte]*compiledEntry)}, nil
}

// Close releases the runtime and every compiled module, and stops the
// compilations in progress. Runs in progress fail.
func (w *Wasm) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stop()
	w.compiling.Wait() // wazero must not compile on a closed runtime
	return w.rt.Close(ctx)
}

// Kind returns KindWasm.
func (w *Wasm) Kind() Kind { return KindWasm }

// Run runs spec.Code as a WASI command (calling its _start), or, when
// spec.Program is ProgramJS, evaluates it as JavaScript. Spec.Files is
// refused: the guest has no file system at all.
func (w *Wasm) Run(ctx context.Context, spec *Spec) (*Result, error) {
	if spec == nil {
		return nil, &SpecError{Field: "Spec", Reason: "nil"}
	}
	if err := checkEnv(spec.Env); err != nil {
		return nil, err
	}
	if len(spec.Files) > 0 {
		return nil, &SpecError{Field: "Files", Reason: "the wasm kind has no file system"}
	}
	if spec.Egress != nil && spec.Program != ProgramJS {
		return nil, &SpecError{Field: "Egress", Reason: "a WASI module has no sockets and no fetch: network egress is for JavaScript and os-sandbox code"}
	}
	switch spec.Program {
	case "":
		if len(spec.Code) == 0 {
			return nil, &SpecError{Field: "Code", Reason: "empty module"}
		}
		cm, release, err := w.compile(ctx, sha256.Sum256(spec.Code), spec.Code)
		if err != nil {
			return nil, err
		}
		defer release()
		return w.exec(ctx, spec, cm, nil, runStart)
	case ProgramJS:
		return w.runJS(ctx, spec)
	default:
		return nil, &SpecError{Field: "Program", Reason: fmt.Sprintf("%q: want empty (a WASI module in Code) or %q", spec.Program, ProgramJS)}
	}
}

// background runs build apart from the call that asked for it, under the
// sandbox's life: a caller that gives up does not waste it, the next caller
// shares it, and Close waits for it. A panic in build is its error. On an
// error, failed runs under w.mu, to record it and drop the entry so that
// the next call tries again. ready is closed once all is done. The caller
// holds w.mu.
func (w *Wasm) background(ready chan struct{}, build func() error, failed func(error)) {
	w.compiling.Add(1)
	go func() {
		defer w.compiling.Done()
		defer close(ready)
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panicked: %v", r)
				}
			}()
			return build()
		}()
		if err != nil {
			w.mu.Lock()
			failed(err)
			w.mu.Unlock()
		}
	}()
}

// compile returns the compiled form of module, whose digest is key, from
// the cache when it is there. release must be called when the caller is
// done with it.
func (w *Wasm) compile(ctx context.Context, key [32]byte, module []byte) (wazero.CompiledModule, func(), error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, nil, &SetupError{Kind: KindWasm, Reason: "the sandbox is closed"}
	}
	e, ok := w.compiled[key]
	if !ok && len(w.compiled) < w.maxCache {
		e = &compiledEntry{ready: make(chan struct{})}
		w.compiled[key] = e
		// Compile apart from this call: its caller may give up (a cancel must
		// stop a run within a second; QuickJS takes longer to compile), and
		// the next caller shares the result. Close stops it.
		w.background(e.ready, func() (err error) {
			cctx := experimental.WithCompilationWorkers(w.life, runtime.GOMAXPROCS(0))
			e.cm, err = w.rt.CompileModule(cctx, module)
			return err
		}, func(err error) {
			e.cm, e.err = nil, err
			delete(w.compiled, key)
		})
	}
	w.mu.Unlock()
	if e == nil {
		// The cache is full: compile for this call only.
		cm, err := w.rt.CompileModule(ctx, module)
		if err != nil {
			if stop := ctx.Err(); stop != nil {
				return nil, nil, fmt.Errorf("sandbox: compile: %w", stop)
			}
			return nil, nil, &SetupError{Kind: KindWasm, Reason: "invalid module: " + err.Error(), Err: err}
		}
		return cm, func() { _ = cm.Close(context.WithoutCancel(ctx)) }, nil
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("sandbox: compile: %w", ctx.Err())
	}
	if e.err != nil {
		return nil, nil, &SetupError{Kind: KindWasm, Reason: "invalid module: " + e.err.Error(), Err: e.err}
	}
	return e.cm, func() {}, nil
}

// guestBody runs the guest once instantiated; it returns the exit code and
// the value (JavaScript only).
type guestBody func(ctx context.Context, mod api.Module, spec *Spec, lim Limits, stderr io.Writer) (code int, value []byte, err error)

func runStart(ctx context.Context, mod api.Module, _ *Spec, _ Limits, _ io.Writer) (int, []byte, error) {
	start := mod.ExportedFunction("_start")
	if start == nil {
		return 0, nil, &SetupError{Kind: KindWasm, Reason: "module exports no _start (want a WASI command)"}
	}
	_, err := start.Call(ctx)
	return 0, nil, err
}

// execOptions adjusts an instance for a kind of guest. Nil means none.
type execOptions struct {
	// nanotime is the guest's monotonic clock; nil: the host's.
	nanotime sys.Nanotime
	// reserve is the linear memory the guest is known to grow to at once
	// (a snapshot's size), allocated up front instead of grown into.
	reserve uint64
}

// exec instantiates cm under spec's limits and runs body on it.
func (w *Wasm) exec(parent context.Context, spec *Spec, cm wazero.CompiledModule, eo *execOptions, body guestBody) (*Result, error) {
	if eo == nil {
		eo = &execOptions{}
	}
	lim := spec.Limits.withDefaults()
	if need := minMemory(cm); need > uint64(lim.Memory) {
		return nil, &LimitError{Limit: LimitMemory}
	}
	timeout, which := lim.WallClock, LimitWallClock
	if lim.CPUTime < timeout {
		timeout, which = lim.CPUTime, LimitCPUTime
	}
	ctx, cancel := runContext(parent, timeout, which)
	defer cancel(nil)
	over := func() { cancel(&LimitError{Limit: LimitOutput}) }
	stdout := &cappedBuffer{max: lim.Output, over: over}
	stderr := &cappedBuffer{max: lim.Output, over: over}
	mem := &memoryCap{max: uint64(lim.Memory), reserve: eo.reserve}

	name := spec.Program
	if name == "" {
		name = "module"
	}
	cfg := wazero.NewModuleConfig().
		WithName(""). // anonymous: one instance per call, never shared
		WithStartFunctions().
		WithArgs(append([]string{name}, spec.Args...)...).
		WithStdin(bytes.NewReader(spec.Stdin)).
		WithStdout(stdout).
		WithStderr(stderr).
		WithSysWalltime().
		WithSysNanotime().
		// wazero sleeps in host code (poll_oneoff, a pending JavaScript
		// timer) where closing the module on the deadline cannot reach it:
		// the sleep itself must end with the run.
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}).
		WithRandSource(crand.Reader)
	if eo.nanotime != nil {
		cfg = cfg.WithNanotime(eo.nanotime, 1)
	}
	for k, v := range spec.Env {
		cfg = cfg.WithEnv(k, v)
	}
	// No WithFS: the guest has no preopened directory. No socket config: it
	// has no socket.

	res := &Result{}
	code, value, err := func() (code int, value []byte, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("wasm guest: %v", r)
			}
		}()
		mod, err := w.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), cm, cfg)
		if err != nil {
			// A missing import, a failed data segment: nothing of the guest ran.
			return 0, nil, &SetupError{Kind: KindWasm, Reason: "cannot instantiate the module: " + err.Error(), Err: err}
		}
		defer mod.Close(context.WithoutCancel(ctx))
		return body(ctx, mod, spec, lim, stderr)
	}()
	res.Stdout, res.Stderr, res.ExitCode, res.Value = stdout.bytes(), stderr.bytes(), code, value

	if stop := stopCause(parent, ctx); stop != nil {
		return res, stop
	}
	if mem.refused() {
		return res, &LimitError{Limit: LimitMemory}
	}
	var setup *SetupError
	if errors.As(err, &setup) {
		return nil, setup
	}
	var limit *LimitError
	if errors.As(err, &limit) {
		return res, limit
	}
	var exit *sys.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = int(exit.ExitCode())
	default:
		// A trap: keep its first line (the guest's stack trace is noise).
		msg, _, _ := strings.Cut(err.Error(), "\n")
		res.ExitCode = -1
		res.Stderr = append(res.Stderr, []byte("\n"+msg+"\n")...)
	}
	return res, nil
}

// minMemory is the linear memory a module needs before it runs.
func minMemory(cm wazero.CompiledModule) uint64 {
	var need uint64
	for _, m := range cm.ExportedMemories() {
		need = max(need, uint64(m.Min())*wasmPage)
	}
	for _, m := range cm.ImportedMemories() {
		need = max(need, uint64(m.Min())*wasmPage)
	}
	return need
}

// memoryCap backs one instance's linear memory and refuses to grow it past
// max: the guest's memory.grow then fails, and refused records that the
// limit was reached.
type memoryCap struct {
	max     uint64
	reserve uint64 // capacity to allocate at first, within max

	mu  sync.Mutex
	hit bool
}

func (m *memoryCap) Allocate(capacity, _ uint64) experimental.LinearMemory {
	return &linearMemory{cap: m, buf: make([]byte, 0, min(max(capacity, m.reserve), m.max))}
}

func (m *memoryCap) refused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hit
}

type linearMemory struct {
	cap *memoryCap
	buf []byte
}

func (l *linearMemory) Reallocate(size uint64) []byte {
	if size > l.cap.max {
		// exec checked that the initial size fits, so this is a growth.
		l.cap.mu.Lock()
		l.cap.hit = true
		l.cap.mu.Unlock()
		return nil
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
		return l.buf
	}
	// Grow geometrically, within the cap, so a guest growing page by page
	// does not copy its memory on every page.
	newCap := min(max(size, 2*uint64(cap(l.buf))), max(l.cap.max, size))
	nb := make([]byte, size, newCap)
	copy(nb, l.buf)
	l.buf = nb
	return l.buf
}

func (l *linearMemory) Free() { l.buf = nil }
