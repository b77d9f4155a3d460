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

func (w *Wasm) runJS(ctx context.Context, spec *Spec) (res *Result, err error) {
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
	if spec.Egress != nil {
		f, err := newJSFetcher(spec.Egress)
		if err != nil {
			return nil, err
		}
		defer f.close()
		ctx = context.WithValue(ctx, jsFetcherKey{}, f)
		defer func() {
			if res != nil {
				res.Egress = f.stats()
			}
		}()
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

// jsHarness wraps the user's code. The template (see jsTemplate) runs it
// once, with the host function (see jsHostCall) at globalThis.__babel_host,
// which it takes out of the global scope into its closure. It leaves one
// function at globalThis.__babel_run, which each call's script,
// jsHarnessCall, calls, and which first removes itself from the global
// scope. That function defines the globals input (stdin, parsed as JSON
// when it is JSON) and env (the declared environment, also set for
// std.getenv: QuickJS's libc reads no WASI environment, as the module's
// _start is never called), and fetch, Headers and Response when the call
// declares egress (see jsfetch.go); runs the code with an indirect eval
// (global scope, no access to the harness's locals); awaits a promise
// result; and returns one JSON envelope.
const jsHarness = `(function (host) {
  delete globalThis.__babel_host;
  const stringify = JSON.stringify, parse = JSON.parse, isArray = Array.isArray, keys = Object.keys,
    define = (k, v) => Object.defineProperty(globalThis, k, { configurable: true, writable: true, value: v });
  function headerList(h) {
    const out = [];
    if (h === undefined || h === null) return out;
    if (h instanceof Headers) { h.forEach((v, k) => out.push([k, v])); return out; }
    if (isArray(h)) {
      for (const p of h) {
        if (!isArray(p) || p.length !== 2) throw new TypeError("fetch: a header must be a [name, value] pair");
        out.push([String(p[0]), String(p[1])]);
      }
      return out;
    }
    if (typeof h === "object") { for (const k of keys(h)) out.push([k, String(h[k])]); return out; }
    throw new TypeError("fetch: headers must be an object, an array of pairs or a Headers");
  }
  class Headers {
    #list;
    constructor(init) { this.#list = headerList(init).map(p => [p[0].toLowerCase(), p[1]]); }
    get(name) {
      name = String(name).toLowerCase();
      const vs = this.#list.filter(p => p[0] === name).map(p => p[1]);
      return vs.length ? vs.join(", ") : null;
    }
    has(name) { return this.get(name) !== null; }
    append(name, value) { this.#list.push([String(name).toLowerCase(), String(value)]); }
    delete(name) { name = String(name).toLowerCase(); this.#list = this.#list.filter(p => p[0] !== name); }
    set(name, value) { this.delete(name); this.append(name, value); }
    forEach(fn, self) { for (const p of this.#list) fn.call(self, p[1], p[0], this); }
    *entries() { for (const p of this.#list) yield [p[0], p[1]]; }
    *keys() { for (const p of this.#list) yield p[0]; }
    *values() { for (const p of this.#list) yield p[1]; }
    [Symbol.iterator]() { return this.entries(); }
  }
  class Response {
    #body; #used = false;
    constructor(r) {
      this.status = r.status; this.statusText = r.statusText; this.ok = r.status >= 200 && r.status <= 299;
      this.url = r.url; this.redirected = false; this.headers = new Headers(r.headers); this.#body = r.body;
    }
    get bodyUsed() { return this.#used; }
    #take() {
      if (this.#used) throw new TypeError("fetch: the body was already read");
      this.#used = true;
      return this.#body;
    }
    text() { try { return Promise.resolve(this.#take()); } catch (e) { return Promise.reject(e); } }
    json() { try { return Promise.resolve(parse(this.#take())); } catch (e) { return Promise.reject(e); } }
  }
  function fetch(input, init) {
    try {
      if (init === undefined || init === null) init = {};
      const url = String(input !== null && typeof input === "object" && typeof input.url === "string" ? input.url : input);
      const method = init.method === undefined ? "GET" : String(init.method).toUpperCase();
      let body = init.body === undefined ? null : init.body;
      if (body !== null && typeof body !== "string") throw new TypeError("fetch: the body must be a string (JSON.stringify an object)");
      const r = parse(host(stringify({ url, method, headers: headerList(init.headers), body })));
      if (r.error !== undefined) throw new TypeError("fetch: " + r.error);
      return Promise.resolve(new Response(r));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  define("__babel_run", function (s, envText, src, net) {
    delete globalThis.__babel_run;
    if (net) { define("fetch", fetch); define("Headers", Headers); define("Response", Response); }
    globalThis.input = (function () {
      if (s === "") return undefined;
      try { return parse(s); } catch (e) { return s; }
    })();
    globalThis.env = parse(envText);
    for (const k of keys(env)) std.setenv(k, env[k]);
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
  });
})(globalThis.__babel_host);`

// jsHarnessCall is a call's script: stdin, the environment as JSON text
// and the code, embedded as JSON string literals (valid JavaScript), and
// whether the call has network.
const jsHarnessCall = `__babel_run(%s, %s, %s, %t)`

func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func buildJSHarness(spec *Spec) string {
	env, _ := json.Marshal(spec.Env) // a map of strings always marshals
	if spec.Env == nil {
		env = []byte("{}")
	}
	return fmt.Sprintf(jsHarnessCall, jsString(string(spec.Stdin)), jsString(string(env)), jsString(string(spec.Code)), spec.Egress != nil)
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
// returns a pointer to (address<<32 | length). The guest's copy is not
// freed: the instance is thrown away after the call.
func (q *qjsCall) toString(jctx, v uint64) string {
	s, _, _ := q.cString(jctx, v)
	return s
}

// cString is toString that also returns the guest addresses of the
// string's bytes and of its header, for a caller that frees them.
func (q *qjsCall) cString(jctx, v uint64) (s string, bytesAt, headerAt uint64) {
	p := q.call("QJS_ToCString", jctx, v)
	if q.err != nil {
		return "", 0, 0
	}
	if uint32(p) == 0 {
		q.err = &LimitError{Limit: LimitMemory}
		return "", 0, 0
	}
	mem := q.mod.Memory()
	packed, ok := mem.ReadUint64Le(uint32(p))
	if !ok {
		q.err = fmt.Errorf("quickjs: string header at %#x out of range", p)
		return "", 0, 0
	}
	b, ok := mem.Read(uint32(packed>>32), uint32(packed))
	if !ok {
		q.err = fmt.Errorf("quickjs: string of %d bytes out of range", uint32(packed))
		return "", 0, 0
	}
	return string(b), packed >> 32, p // string copies out of guest memory
}
