package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// StartOptions configures OS.Start. Nil means the defaults.
type StartOptions struct {
	// Stderr receives the program's standard error, up to Limits.Output
	// bytes (the rest is dropped); nil discards it. It must be safe for
	// use from another goroutine.
	Stderr io.Writer
	// Grace is how long Close waits for the program to exit once its input
	// is closed, before killing it (default 500ms).
	Grace time.Duration
}

// Process is a program running in the os sandbox, started by OS.Start for
// a conversation over its standard streams (a stdio MCP server, say): Read
// reads its standard output, Write writes its standard input. Read and
// Write may be called from different goroutines.
type Process struct {
	stdin  *os.File
	stdout *os.File
	cancel context.CancelCauseFunc
	grace  time.Duration
	done   chan struct{}
	res    *Result
	err    error
	close  sync.Once
}

var errClosed = errors.New("sandbox: process closed")

// Start starts spec.Program in the os sandbox, as Run does, and returns once
// it is running (or with a *SetupError once bubblewrap has failed). The
// sandbox is the same as Run's; the limits apply to the whole life of the
// process (WallClock included: set it for a long-lived server). The
// process ends when ctx is done, when Close is called, or when it exits;
// spec.Stdin must be empty (write to the Process instead).
func (o *OS) Start(ctx context.Context, spec *Spec, opts *StartOptions) (*Process, error) {
	if err := o.check(spec); err != nil {
		return nil, err
	}
	if len(spec.Stdin) > 0 {
		return nil, &SpecError{Field: "Stdin", Reason: "Start takes input through Process.Write"}
	}
	if opts == nil {
		opts = &StartOptions{}
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = 500 * time.Millisecond
	}
	lim := spec.Limits.withDefaults()
	runCtx, cancel := runContext(ctx, lim.WallClock, LimitWallClock)
	inR, inW, err := os.Pipe()
	if err != nil {
		cancel(nil)
		return nil, &SetupError{Kind: KindOS, Reason: "pipe: " + err.Error(), Err: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		cancel(nil)
		inR.Close()
		inW.Close()
		return nil, &SetupError{Kind: KindOS, Reason: "pipe: " + err.Error(), Err: err}
	}
	var stderr io.Writer = &droppingWriter{w: opts.Stderr, left: lim.Output}
	r, err := o.launch(ctx, runCtx, spec, lim, inR, outW, stderr)
	inR.Close() // the child holds its own copies
	outW.Close()
	if err != nil {
		cancel(nil)
		inW.Close()
		outR.Close()
		return nil, err
	}
	p := &Process{stdin: inW, stdout: outR, cancel: cancel, grace: grace, done: make(chan struct{})}
	started := r.awaitStarted()
	go func() {
		r.wait()
		p.res, p.err = r.outcome(ctx, &Result{})
		cancel(nil)
		close(p.done)
	}()
	if !started {
		<-p.done
		p.stdin.Close()
		p.stdout.Close()
		return nil, p.err
	}
	return p, nil
}

// Read reads the program's standard output.
func (p *Process) Read(b []byte) (int, error) { return p.stdout.Read(b) }

// Write writes the program's standard input.
func (p *Process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close ends the program: it closes its input, waits up to the grace period
// for it to exit, then kills it. It returns once no process of the sandbox
// is left.
func (p *Process) Close() error {
	p.close.Do(func() {
		p.stdin.Close()
		t := time.NewTimer(p.grace)
		select {
		case <-p.done:
		case <-t.C:
			p.cancel(errClosed)
		}
		t.Stop()
		<-p.done
		p.stdout.Close()
	})
	return nil
}

// Wait waits for the program to end and says how: its exit code, with a
// *LimitError if a limit stopped it. Result.Stdout is empty (the output
// went through Read) and so is Result.Stderr (it went to StartOptions.Stderr).
func (p *Process) Wait() (*Result, error) {
	<-p.done
	return p.res, p.err
}

// droppingWriter passes on the first left bytes and drops the rest.
type droppingWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int64
}

func (d *droppingWriter) Write(b []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(b)
	if d.w == nil || d.left <= 0 {
		return n, nil
	}
	if int64(len(b)) > d.left {
		b = b[:d.left]
	}
	d.left -= int64(len(b))
	_, _ = d.w.Write(b) // a failing sink must not stall the program
	return n, nil
}
