package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	_ "unsafe" // for go:linkname

	// The QuickJS engine, compiled to WebAssembly and embedded by qjs. Only
	// its module bytes are used: see qjsModule.
	_ "github.com/fastschema/qjs"

	"github.com/tetratelabs/wazero/api"
)

// qjsModule is QuickJS compiled to WASI, as embedded by
// github.com/fastschema/qjs (pinned at v0.0.6; TestQuickJSModuleIsPinned
// pins its digest). Read-only.
//
// We drive the module ourselves instead of calling qjs.New, because qjs.New
// mounts a host directory read-write into the guest, keeps its compiled
// module and runtime configuration (CloseOnContextDone included) in package
// globals set by whichever caller comes first, hashes the whole module on
// every call, and has no per-instance memory cap. Here the guest gets no
// directory at all, our runtime's configuration, our compilation cache and
// a linear memory capped per call.
//
//go:linkname qjsModule github.com/fastschema/qjs.wasmBytes
var qjsModule []byte

func (w *Wasm) runJS(ctx context.Context, spec *Spec) (*Result, error) {
	if len(qjsModule) == 0 {
		return nil, &SetupError{Kind: KindWasm, Reason: "the QuickJS module is not linked in"}
	}
	tpl, err := w.jsTemplate(ctx)
	if err != nil {
		return nil, err
	}
	if lim := spec.Limits.withDefaults(); uint64(len(tpl.memory)) > uint64(lim.Memory) {
		// The runtime alone does not fit: the code could not even start.
		return nil, &LimitError{Limit: LimitMemory}
	}
	// The instance's monotonic clock starts where the template's stood, so
	// performance.now() counts from the start of this call.
	start := time.Now()
	clock := func() int64 { return templateNanotime + int64(time.Since(start)) }
	eo := &execOptions{nanotime: clock, reserve: uint64(len(tpl.memory))}
	return w.exec(ctx, spec, tpl.cm, eo, func(ctx context.Context, mod api.Module, spec *Spec, lim Limits, stderr io.Writer) (int, []byte, error) {
		return runQuickJS(ctx, mod, tpl, spec, lim, stderr)
	})
}

// jsEnvelope is what the harness returns: the outcome of the user's code.
type jsEnvelope struct {
	OK    bool    `json:"ok"`
	Value *string `json:"value"` // JSON text of the completion value; nil when undefined
	Error string  `json:"error"`
}

// jsHarness wraps the user's code. The template (see jsTemplate) compiles
// it once and keeps the function it defines; each call's script,
// jsHarnessCall, calls it, and it first removes itself from the global
// scope. It defines the globals input (stdin, parsed as JSON when it is
// JSON) and env (the declared environment, also set for std.getenv:
// QuickJS's libc reads no WASI environment, as the module's _start is
// never called), runs the code with an indirect eval (global scope, no
// access to the harness's locals), awaits a promise result, and returns one
// JSON envelope.
const jsHarness = `Object.defineProperty(globalThis, "__babel_run", { configurable: true, writable: true, value: function (s, envText, src) {
  delete globalThis.__babel_run;
  globalThis.input = (function () {
    if (s === "") return undefined;
    try { return JSON.parse(s); } catch (e) { return s; }
  })();
  globalThis.env = JSON.parse(envText);
  for (const k of Object.keys(env)) std.setenv(k, env[k]);
  const stringify = JSON.stringify;
  return (async function () {
    let v;
    try {
      v = (0, eval)(src);
      if (v !== null && typeof v === "object" && typeof v.then === "function") v = await v;
    } catch (e) {
      let m = String(e);
      try { if (e && typeof e.stack === "string" && e.stack !== "") m += "\n" + e.stack; } catch (_) {}
      return stringify({ ok: false, error: m });
    }
    if (v === undefined) return stringify({ ok: true });
    let j;
    try { j = stringify(v); } catch (e) { return stringify({ ok: false, error: "result is not JSON: " + String(e) }); }
    return j === undefined ? stringify({ ok: true }) : stringify({ ok: true, value: j });
  })();
} });`

// jsHarnessCall is a call's script: stdin, the environment as JSON text
// and the code, embedded as JSON string literals (valid JavaScript).
const jsHarnessCall = `__babel_run(%s, %s, %s)`

func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func buildJSHarness(spec *Spec) string {
	env, _ := json.Marshal(spec.Env) // a map of strings always marshals
	if spec.Env == nil {
		env = []byte("{}")
	}
	return fmt.Sprintf(jsHarnessCall, jsString(string(spec.Stdin)), jsString(string(env)), jsString(string(spec.Code)))
}

// runQuickJS restores the template's runtime into mod, a fresh instance,
// and evaluates the harness in it.
func runQuickJS(ctx context.Context, mod api.Module, tpl *jsTemplate, spec *Spec, lim Limits, stderr io.Writer) (int, []byte, error) {
	// QuickJS's own heap limit sits below the linear-memory cap, so that
	// running out is usually a catchable "out of memory" error rather than a
	// failed allocation deep in the engine; the cap catches what QuickJS does
	// not count. size_t is 32 bits in the guest. (QuickJS checks no stack
	// depth on WASI: runaway recursion overflows the guest's shadow stack and
	// traps, which ends the call and nothing else.)
	heap := uint64(lim.Memory - lim.Memory/4)
	heap = min(heap, 1<<32-1)
	if err := tpl.restore(mod, uint32(heap)); err != nil {
		return 0, nil, err
	}
	q := &qjsCall{ctx: ctx, mod: mod}
	jctx := uint64(tpl.jctx)
	code := q.cstring(buildJSHarness(spec))
	file := q.cstring("<code>")
	opts := q.call("QJS_CreateEvalOption", code, 0, 0, file, 0)
	val := q.call("QJS_Eval", jctx, opts)
	if q.err != nil {
		return 0, nil, q.err
	}
	if uint32(q.call("JS_HasException", jctx)) != 0 {
		exc := q.call("JS_GetException", jctx)
		msg := q.toString(jctx, exc)
		if q.err != nil {
			return 0, nil, q.err
		}
		fmt.Fprintf(stderr, "uncaught exception: %s\n", msg)
		return 1, nil, nil
	}
	out := q.toString(jctx, val)
	if q.err != nil {
		return 0, nil, q.err
	}
	var env jsEnvelope
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		fmt.Fprintf(stderr, "malformed result: %v\n", err)
		return 1, nil, nil
	}
	if !env.OK {
		fmt.Fprintf(stderr, "%s\n", env.Error)
		if strings.HasPrefix(env.Error, "InternalError: out of memory") {
			return 1, nil, &LimitError{Limit: LimitMemory}
		}
		return 1, nil, nil
	}
	if env.Value == nil {
		return 0, nil, nil
	}
	return 0, []byte(*env.Value), nil
}

// qjsCall calls the QuickJS module's exports, remembering the first error
// so that a sequence of calls reads straight.
type qjsCall struct {
	ctx context.Context
	mod api.Module
	err error
}

func (q *qjsCall) call(name string, args ...uint64) uint64 {
	if q.err != nil {
		return 0
	}
	fn := q.mod.ExportedFunction(name)
	if fn == nil {
		q.err = &SetupError{Kind: KindWasm, Reason: "the QuickJS module does not export " + name}
		return 0
	}
	r, err := fn.Call(q.ctx, args...)
	if err != nil {
		q.err = err
		return 0
	}
	if len(r) == 0 {
		return 0
	}
	return r[0]
}

// cstring copies s, NUL-terminated, into guest memory.
func (q *qjsCall) cstring(s string) uint64 {
	p := q.call("malloc", uint64(len(s)+1))
	if q.err != nil {
		return 0
	}
	if uint32(p) == 0 {
		q.err = &LimitError{Limit: LimitMemory}
		return 0
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	if !q.mod.Memory().Write(uint32(p), b) {
		q.err = fmt.Errorf("quickjs: write %d bytes at %#x: out of range", len(b), p)
	}
	return p
}

// toString converts a JS value to a Go string through QJS_ToCString, which
// returns a pointer to (address<<32 | length).
func (q *qjsCall) toString(jctx, v uint64) string {
	p := q.call("QJS_ToCString", jctx, v)
	if q.err != nil {
		return ""
	}
	if uint32(p) == 0 {
		q.err = &LimitError{Limit: LimitMemory}
		return ""
	}
	mem := q.mod.Memory()
	packed, ok := mem.ReadUint64Le(uint32(p))
	if !ok {
		q.err = fmt.Errorf("quickjs: string header at %#x out of range", p)
		return ""
	}
	b, ok := mem.Read(uint32(packed>>32), uint32(packed))
	if !ok {
		q.err = fmt.Errorf("quickjs: string of %d bytes out of range", uint32(packed))
		return ""
	}
	return string(b) // copies out of guest memory
}
