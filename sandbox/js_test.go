package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func runJS(t *testing.T, code string, stdin string, env map[string]string) (*Result, error) {
	t.Helper()
	spec := JavaScript(code)
	spec.Stdin, spec.Env = []byte(stdin), env
	return testSB.wasm.Run(context.Background(), spec)
}

func TestQuickJSModuleIsPinned(t *testing.T) {
	t.Parallel()
	// runQuickJS calls the module's exports directly: an upgrade of qjs must
	// be a deliberate change that re-runs these tests.
	sum := sha256.Sum256(qjsModule)
	if got := hex.EncodeToString(sum[:]); got != "88fcbeead33cca3ec8394feb0fb3eec8047ec9ac5062aba7a63799cee11989b7" {
		t.Fatalf("the QuickJS module changed (sha256 %s): review runQuickJS against the new qjs", got)
	}
}

func TestJSValueOutputAndInput(t *testing.T) {
	t.Parallel()
	res, err := runJS(t, `console.log("hi", input.name); ({sum: input.a + input.b, name: input.name.toUpperCase()})`,
		`{"a": 2, "b": 3, "name": "ada"}`, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if string(res.Value) != `{"sum":5,"name":"ADA"}` || string(res.Stdout) != "hi ada\n" {
		t.Fatalf("value %s stdout %q", res.Value, res.Stdout)
	}
	res, err = runJS(t, `input.length`, "plain text", nil)
	if err != nil || string(res.Value) != "10" {
		t.Fatalf("text input: %+v %v", res, err)
	}
	res, err = runJS(t, `Promise.resolve(input * 2)`, "21", nil)
	if err != nil || string(res.Value) != "42" {
		t.Fatalf("promise: %+v %v", res, err)
	}
	res, err = runJS(t, `print("only output")`, "", nil)
	if err != nil || res.Value != nil || string(res.Stdout) != "only output\n" {
		t.Fatalf("undefined value: %+v %v", res, err)
	}
}

func TestJSErrorsAreReported(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{
		`throw new TypeError("bad thing")`:   "TypeError: bad thing",
		`let = ;`:                            "SyntaxError",
		`Promise.reject(new Error("later"))`: "Error: later",
		`undefinedFunction()`:                "ReferenceError",
	} {
		res, err := runJS(t, code, "", nil)
		if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), want) {
			t.Errorf("%s: res %+v err %v, want exit 1 and %q on stderr", code, res, err, want)
		}
	}
	res, err := runJS(t, `std.exit(3)`, "", nil)
	if err != nil || res.ExitCode != 3 {
		t.Errorf("std.exit: %+v %v", res, err)
	}
}

func TestJSSeesOnlyDeclaredEnvironment(t *testing.T) {
	canary := setCanary(t)
	res, err := runJS(t, `JSON.stringify([std.getenviron(), env, std.getenv("`+canaryName+`")])`, "",
		map[string]string{"DECLARED": "yes"})
	if err != nil {
		t.Fatal(err)
	}
	assertNoCanary(t, "javascript env", res.Value)
	if strings.Contains(string(res.Value), canary) {
		t.Fatalf("canary visible")
	}
	var s string
	if err := json.Unmarshal(res.Value, &s); err != nil || s != `[{"DECLARED":"yes"},{"DECLARED":"yes"},null]` {
		t.Fatalf("environment = %s", res.Value)
	}
}

func TestJSHasNoFileSystem(t *testing.T) {
	t.Parallel()
	// The server's working directory (this package, holding doc.go) and a
	// file of the server's: neither is reachable.
	host := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(host, []byte("private"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("doc.go"); err != nil {
		t.Fatal("the test must run in the package directory")
	}
	code := `
const seen = [];
for (const p of ["doc.go", "./doc.go", "/doc.go", "../go.mod", "../../go.mod", "/etc/shadow", "/etc/passwd", HOST, ".", "/", ".."]) {
  if (std.loadFile(p) !== null) seen.push("loaded " + p);
  const [ents, err] = os.readdir(p);
  if (err === 0 && ents.length > 0) seen.push("listed " + p + ": " + ents);
  const [st, serr] = os.stat(p);
  if (serr === 0) seen.push("stat " + p);
}
for (const p of ["written", "/written", "../written", "/tmp/written"]) {
  if (std.open(p, "w") !== null) seen.push("opened for writing " + p);
  if (os.open(p, os.O_WRONLY | os.O_CREAT) >= 0) seen.push("created " + p);
  if (os.mkdir(p + "dir") === 0) seen.push("mkdir " + p);
}
seen`
	res, err := runJS(t, strings.Replace(code, "HOST", jsString(host), 1), "", nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if string(res.Value) != "[]" {
		t.Fatalf("the JavaScript sandbox reached files: %s", res.Value)
	}
	if _, err := os.Stat("written"); err == nil {
		os.Remove("written")
		t.Fatalf("a file was written in the server's working directory")
	}
}

func TestJSHasNoNetworkOrProcess(t *testing.T) {
	t.Parallel()
	res, err := runJS(t, `[typeof fetch, typeof XMLHttpRequest, typeof WebSocket, typeof os.exec, typeof os.socket, typeof std.urlGet, typeof std.popen, typeof os.Worker].join(",")`, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Value); got != `"undefined,undefined,undefined,undefined,undefined,undefined,undefined,undefined"` {
		t.Fatalf("network or process primitives present: %s", got)
	}
}

func TestJSFreshInstancePerCall(t *testing.T) {
	t.Parallel()
	for i := 0; i < 2; i++ {
		res, err := runJS(t, `globalThis.n = (globalThis.n || 0) + 1; Object.prototype.polluted = true; n`, "", nil)
		if err != nil || string(res.Value) != "1" {
			t.Fatalf("call %d: %+v %v: state survived between calls", i, res, err)
		}
	}
	res, err := runJS(t, `({}).polluted === undefined`, "", nil)
	if err != nil || string(res.Value) != "true" {
		t.Fatalf("prototype pollution survived: %+v %v", res, err)
	}
}

func TestJSLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, code string
		lim        Limits
		limit      string
	}{
		{"infinite loop", `for (;;) {}`, Limits{CPUTime: 300 * time.Millisecond, WallClock: 5 * time.Second}, LimitCPUTime},
		{"infinite loop, wall clock", `while (true) {}`, Limits{WallClock: 300 * time.Millisecond}, LimitWallClock},
		{"pending timer", `setTimeout(() => {}, 1e9)`, Limits{WallClock: 300 * time.Millisecond}, LimitWallClock},
		{"memory bomb", `const a = []; for (;;) a.push(new Uint8Array(1 << 20))`, Limits{Memory: 48 << 20}, LimitMemory},
		{"memory bomb, strings", `const a = []; let s = "x"; for (;;) { s = s + s; a.push(s) }`, Limits{Memory: 48 << 20}, LimitMemory},
		{"huge output", `const l = "x".repeat(1023); for (;;) print(l)`, Limits{Output: 64 << 10}, LimitOutput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := JavaScript(c.code)
			spec.Limits = c.lim
			start := time.Now()
			res, err := testSB.wasm.Run(context.Background(), spec)
			wantLimit(t, err, c.limit)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("stopped after %v", d)
			}
			if c.limit == LimitOutput && int64(len(res.Stdout)) != c.lim.Output {
				t.Errorf("stdout holds %d bytes, want the cap %d", len(res.Stdout), c.lim.Output)
			}
		})
	}
	t.Run("runaway recursion", func(t *testing.T) {
		t.Parallel()
		// QuickJS checks no stack depth on WASI: the guest's shadow stack
		// overflows and traps, which ends this call and nothing else.
		res, err := runJS(t, `function f(n) { return f(n + 1) + 1 } f(0)`, "", nil)
		if err != nil || res.ExitCode == 0 {
			t.Fatalf("res %+v err %v, want a failed run", res, err)
		}
		res, err = runJS(t, `1 + 1`, "", nil)
		if err != nil || string(res.Value) != "2" {
			t.Fatalf("the next call: %+v %v", res, err)
		}
	})
}

func TestJSCancelStopsWithinASecond(t *testing.T) {
	t.Parallel()
	// Wait for QuickJS to be compiled, so that the cancel lands in the loop.
	if _, err := runJS(t, `0`, "", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var cancelledAt time.Time
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancelledAt = time.Now()
		cancel()
	}()
	_, err := testSB.wasm.Run(ctx, JavaScript(`for (;;) {}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(cancelledAt); d > time.Second {
		t.Fatalf("returned %v after cancel", d)
	}
}

func TestJSCancelDuringCompileStopsWithinASecond(t *testing.T) {
	t.Parallel()
	// A sandbox of its own, so that QuickJS is not compiled yet.
	w, err := NewWasm(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = w.Run(ctx, JavaScript(`1`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("returned after %v", d)
	}
}

// Each call starts from a snapshot of a runtime made once (jsTemplate):
// what must differ per call does.
func TestJSSnapshotPerCallState(t *testing.T) {
	t.Parallel()
	t.Run("Math.random is seeded per call", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for i := 0; i < 4; i++ {
			res, err := runJS(t, `[Math.random(), Math.random()]`, "", nil)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("res %+v err %v", res, err)
			}
			if seen[string(res.Value)] {
				t.Fatalf("two calls drew the same random numbers %s", res.Value)
			}
			seen[string(res.Value)] = true
		}
	})
	t.Run("performance.now counts from the call", func(t *testing.T) {
		t.Parallel()
		if _, err := runJS(t, `1`, "", nil); err != nil { // the template exists from here on
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		res, err := runJS(t, `[performance.now(), Date.now()]`, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var v [2]float64
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatalf("%s: %v", res.Value, err)
		}
		if v[0] < 0 || v[0] >= 400 {
			t.Fatalf("performance.now() = %v ms, want the time since this call started", v[0])
		}
		if d := time.Since(time.UnixMilli(int64(v[1]))); d < -time.Second || d > time.Minute {
			t.Fatalf("Date.now() is %v away from the host's clock", d)
		}
	})
	t.Run("the harness is gone before the code runs", func(t *testing.T) {
		t.Parallel()
		res, err := runJS(t, `[typeof __babel_run, Object.getOwnPropertyNames(globalThis).filter(n => n.startsWith("__")).join()]`, "", nil)
		if err != nil || string(res.Value) != `["undefined",""]` {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
	t.Run("the heap limit is the call's", func(t *testing.T) {
		t.Parallel()
		// 56 MB is over the heap limit of a 64 MB call (3/4 of it), well
		// under that of the default 512 MB: the same snapshot serves both.
		code := `try { new ArrayBuffer(56 << 20).byteLength } catch (e) { String(e) }`
		spec := JavaScript(code)
		spec.Limits = Limits{Memory: 64 << 20}
		res, err := testSB.wasm.Run(context.Background(), spec)
		if err != nil || !strings.Contains(string(res.Value), "out of memory") {
			t.Fatalf("64 MB call: res %+v err %v, want a caught out-of-memory error", res, err)
		}
		res, err = runJS(t, code, "", nil)
		if err != nil || string(res.Value) != "58720256" {
			t.Fatalf("default call: res %+v err %v, want the buffer", res, err)
		}
	})
	t.Run("a cap below the snapshot names the memory limit", func(t *testing.T) {
		t.Parallel()
		tpl, err := testSB.wasm.jsTemplate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		spec := JavaScript(`1`)
		spec.Limits = Limits{Memory: int64(len(tpl.memory)) - wasmPage}
		_, err = testSB.wasm.Run(context.Background(), spec)
		wantLimit(t, err, LimitMemory)
	})
}
