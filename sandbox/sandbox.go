package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/babelagent/babel/egress"
)

// Sandbox runs one program to completion, isolated from the host.
//
// Run returns the program's output and exit code; a non-zero exit is not an
// error. It returns a *LimitError (with the partial Result) when a limit
// stopped the program, a *SetupError when the sandbox could not start, and
// the context's error when ctx was cancelled. By the time Run returns, no
// process or module instance of the call is left. Run is safe for
// concurrent use.
type Sandbox interface {
	Run(ctx context.Context, spec *Spec) (*Result, error)
}

// Kind names a family of sandbox.
type Kind string

const (
	// KindWasm runs WebAssembly (and JavaScript on QuickJS) on wazero.
	KindWasm Kind = "wasm"
	// KindOS runs a program under bubblewrap.
	KindOS Kind = "os"
)

// ProgramJS is the Spec.Program that asks a Wasm sandbox to evaluate
// Spec.Code as JavaScript on QuickJS.
const ProgramJS = "quickjs"

// Spec says what to run and under which limits.
type Spec struct {
	// Program is what runs. For the os kind: the absolute path of an
	// executable as seen inside the sandbox (for example /usr/bin/python3, or
	// /work/NAME for a File). For the wasm kind: empty to run Code as a WASI
	// module, or ProgramJS to evaluate Code as JavaScript.
	Program string
	// Code is the WASI module or the JavaScript source (wasm kind only).
	Code []byte
	// Args are the program's arguments, not counting the program itself.
	Args []string
	// Stdin is the program's whole standard input.
	Stdin []byte
	// Env is the program's whole environment: only the variables the node
	// declared (its secrets, for instance). The server's environment is never
	// inherited. Keys may not contain '=' or NUL.
	Env map[string]string
	// Files are placed read-only in the work directory (os kind only).
	Files []File
	// Limits bound the run; zero fields take DefaultLimits.
	Limits Limits
	// Egress, when set, gives the program (os kind) an HTTP proxy at
	// ProxyAddr inside its sandbox, or JavaScript (wasm kind) a fetch
	// function, through which it reaches the hosts the options allow,
	// under the egress guard; AnyPublicHost and Proxy are ignored. Nil
	// means no network at all: no proxy, no proxy variable, no fetch. The
	// wasm kind has no sockets either way, and refuses a WASI module's
	// Spec that sets it.
	Egress *egress.Options
}

// File is a file placed read-only in the sandbox's work directory: Data, or
// a copy of the host file Host.
type File struct {
	// Name is a plain file name (no '/'); the file appears at WorkDir/Name.
	Name string
	Data []byte
	// Host is the absolute path of a regular host file to copy instead of
	// Data. It is opened when the sandbox starts, and the sandbox gets a
	// copy: a program placed this way can change nothing on the host, and
	// nothing on the host changes it while it runs.
	Host string
	// Executable makes the file executable (mode 0555 rather than 0444).
	Executable bool
}

// WorkDir is the sandbox's working directory: empty, private to the call,
// destroyed afterwards (os kind).
const WorkDir = "/work"

// Limits bound one run. A zero field means the default (DefaultLimits).
type Limits struct {
	// CPUTime is the CPU time the program may use (RLIMIT_CPU for the os
	// kind; for the wasm kind, whose guest runs on one goroutine, it bounds
	// the guest's running time).
	CPUTime time.Duration
	// Memory caps the address space (RLIMIT_AS, os kind) or the linear
	// memory (wasm kind), in bytes.
	Memory int64
	// Processes caps the processes and threads of the sandbox (RLIMIT_NPROC,
	// counted in the sandbox's own user namespace; os kind).
	Processes int
	// FileSize caps the size of one written file (RLIMIT_FSIZE) and of each
	// of /tmp and the work directory (os kind).
	FileSize int64
	// Output caps each of stdout and stderr, in bytes.
	Output int64
	// WallClock is the longest the run may take, start-up included.
	WallClock time.Duration
}

// DefaultLimits returns the limits a zero Limits field takes.
func DefaultLimits() Limits {
	return Limits{
		CPUTime:   10 * time.Second,
		Memory:    512 << 20,
		Processes: 64,
		FileSize:  64 << 20,
		Output:    4 << 20,
		WallClock: 30 * time.Second,
	}
}

// withDefaults returns l with its zero (or negative) fields set to the defaults.
func (l Limits) withDefaults() Limits { return l.Or(DefaultLimits()) }

// Or returns l with each zero (or negative) field taken from d: a caller
// with its own defaults (stdio MCP servers) fills a Limits the same way.
func (l Limits) Or(d Limits) Limits {
	if l.CPUTime <= 0 {
		l.CPUTime = d.CPUTime
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.FileSize <= 0 {
		l.FileSize = d.FileSize
	}
	if l.Output <= 0 {
		l.Output = d.Output
	}
	if l.WallClock <= 0 {
		l.WallClock = d.WallClock
	}
	return l
}

// Result is what a program left behind.
type Result struct {
	Stdout []byte
	Stderr []byte
	// ExitCode is the program's exit status; 128+N when signal N killed it
	// (os kind); -1 when a wasm module trapped.
	ExitCode int
	// Value is the JSON of a JavaScript program's completion value (the value
	// of its last expression statement, awaited if it is a promise); nil when
	// that value is undefined or for other programs.
	Value []byte
	// Egress counts what the call's egress proxy (os kind) or fetch
	// (JavaScript) did, with Spec.Egress.
	Egress EgressStats
}

// Limit names, as carried by LimitError.Limit.
const (
	LimitWallClock = "wall clock"
	LimitCPUTime   = "cpu time"
	LimitMemory    = "memory"
	LimitOutput    = "output"
	LimitProcesses = "processes"
	LimitFileSize  = "file size"
)

// LimitError says a run was stopped, or failed, because it reached a limit.
type LimitError struct {
	// Limit is one of "wall clock", "cpu time", "memory", "output",
	// "processes", "file size".
	Limit string
}

func (e *LimitError) Error() string { return "sandbox: " + e.Limit + " limit reached" }

// SetupError says why a sandbox could not start. The code did not run, and
// nothing ran in its place.
type SetupError struct {
	Kind   Kind
	Reason string
	Err    error
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("sandbox %s: cannot start: %s", e.Kind, e.Reason)
}
func (e *SetupError) Unwrap() error { return e.Err }

// ExitError says a sandboxed program exited with a non-zero status. Agents
// return it; Sandbox.Run reports the status in Result instead.
type ExitError struct {
	Code int
	// Stderr is the tail of the program's standard error, for humans.
	Stderr string
}

func (e *ExitError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("sandboxed program exited with status %d", e.Code)
	}
	return fmt.Sprintf("sandboxed program exited with status %d: %s", e.Code, e.Stderr)
}

// SpecError says a Spec is malformed.
type SpecError struct {
	Field  string
	Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("sandbox: invalid spec: %s: %s", e.Field, e.Reason)
}

// IsLimit reports whether err is a *LimitError, and which limit.
func IsLimit(err error) (string, bool) {
	var le *LimitError
	if errors.As(err, &le) {
		return le.Limit, true
	}
	return "", false
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &SpecError{Field: "Env", Reason: fmt.Sprintf("invalid variable name %q", k)}
		}
		if strings.ContainsRune(v, 0) {
			return &SpecError{Field: "Env", Reason: fmt.Sprintf("variable %s holds a NUL byte", k)}
		}
	}
	return nil
}

func checkFiles(files []File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\x00") || path.Clean(f.Name) != f.Name {
			return &SpecError{Field: "Files", Reason: fmt.Sprintf("invalid file name %q (want a plain name)", f.Name)}
		}
		if f.Host != "" && (len(f.Data) > 0 || !path.IsAbs(f.Host) || strings.ContainsRune(f.Host, 0)) {
			return &SpecError{Field: "Files", Reason: fmt.Sprintf("file %q: want Data or an absolute Host path, not both", f.Name)}
		}
		if seen[f.Name] {
			return &SpecError{Field: "Files", Reason: fmt.Sprintf("file %q given twice", f.Name)}
		}
		seen[f.Name] = true
	}
	return nil
}

// cappedBuffer keeps the first max bytes written to it and calls over once
// when more arrive. It never fails a write, so a writer is never blocked on
// it; the run is stopped through over instead.
type cappedBuffer struct {
	mu   sync.Mutex
	max  int64
	buf  []byte
	over func()
	hit  bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(len(c.buf))
	if int64(len(p)) > room {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
		}
		if !c.hit {
			c.hit = true
			if c.over != nil {
				c.over()
			}
		}
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *cappedBuffer) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf
}

// runContext derives the context of one run: it ends at the wall-clock (or,
// when shorter, the time) limit, and cancel(cause) stops it early. The
// cause of its end is read with context.Cause.
func runContext(parent context.Context, timeout time.Duration, limit string) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	tctx, tcancel := context.WithTimeoutCause(ctx, timeout, &LimitError{Limit: limit})
	return tctx, func(cause error) {
		cancel(cause)
		tcancel()
	}
}

// stopCause says why a run's context ended: the parent's error when the
// caller cancelled or its deadline passed, else the limit that stopped it.
func stopCause(parent, run context.Context) error {
	if err := parent.Err(); err != nil {
		return fmt.Errorf("sandbox: run stopped: %w", err)
	}
	if run.Err() == nil {
		return nil
	}
	var le *LimitError
	if cause := context.Cause(run); errors.As(cause, &le) {
		return le
	}
	return fmt.Errorf("sandbox: run stopped: %w", run.Err())
}

// tail returns the last n bytes of b as a single trimmed string.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
}
