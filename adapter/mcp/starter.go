package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/babelagent/babel/sandbox"
)

// Command is a stdio server to start.
type Command struct {
	// Path is the program's absolute host path.
	Path string
	Args []string
	// Env is the process's whole environment: PATH=/usr/bin:/bin and the
	// secrets the node declared. Nothing is inherited.
	Env map[string]string
	// Stderr receives the process's standard error; nil discards it.
	Stderr io.Writer
}

// Starter starts stdio MCP servers.
//
// Start returns the process's standard streams as one: Read reads its
// standard output, Write writes its standard input. Close ends the process
// — it closes its input, waits briefly for it to exit, then kills it and
// everything it started — and returns once nothing of it is left. When ctx
// ends the process is killed at once. Start must be safe for concurrent
// use.
//
// SandboxStarter is the implementation, and the default. A Starter given
// through the Go API replaces it; no topology can choose one.
type Starter interface {
	Start(ctx context.Context, cmd *Command) (io.ReadWriteCloser, error)
}

// SandboxStarter starts each stdio server in the os sandbox with
// sandbox.OS.Start (bubblewrap): no network (its own empty network
// namespace), no host environment (Command.Env, plus the sandbox's HOME,
// TMPDIR, LANG and PWD, is all it sees), no view of the host's files but a
// read-only /usr, an unprivileged user with no capability, a seccomp
// filter, rlimits, and a private pid namespace that is killed whole when
// the session closes or the call's context ends.
//
// The program is Command.Path, placed as sandbox.HostProgram says: under
// /usr it runs in place; elsewhere it is copied into the sandbox when the
// server starts, so it must be self-contained (a static binary, or one
// whose libraries and interpreter are under /usr).
//
// It fails closed: where bubblewrap cannot start, Start returns an error
// that wraps a *sandbox.SetupError, and nothing runs in the server's place.
type SandboxStarter struct {
	// OS is the sandbox; nil means sandbox.NewOS(nil), made on each Start.
	OS *sandbox.OS
	// Limits bound each server for the life of its session; zero fields
	// take DefaultServerLimits.
	Limits sandbox.Limits
	// Grace is how long Close waits for the server to exit once its input
	// is closed, before killing it (default 500ms).
	Grace time.Duration
}

// DefaultServerLimits are the limits a zero SandboxStarter.Limits field
// takes. They differ from sandbox.DefaultLimits where a server needs it:
// Go and JavaScript runtimes reserve more than 512 MiB of address space at
// start (and a Go binary built with the race detector about 2 GiB), threads
// count as processes, and a session lasts as long as its tool call, whose
// own deadline ends it first.
func DefaultServerLimits() sandbox.Limits {
	l := sandbox.DefaultLimits()
	l.CPUTime = 2 * time.Minute
	l.Memory = 4 << 30
	l.Processes = 256
	l.WallClock = time.Hour
	return l
}

// Start starts cmd in the os sandbox.
func (s *SandboxStarter) Start(ctx context.Context, cmd *Command) (io.ReadWriteCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o := s.OS
	if o == nil {
		var err error
		if o, err = sandbox.NewOS(nil); err != nil {
			return nil, confinementError(err)
		}
	}
	program, files, err := sandbox.HostProgram(cmd.Path)
	if err != nil {
		return nil, err
	}
	spec := &sandbox.Spec{Program: program, Args: cmd.Args, Env: cmd.Env, Files: files, Limits: s.limits()}
	p, err := o.Start(ctx, spec, &sandbox.StartOptions{Stderr: cmd.Stderr, Grace: s.Grace})
	if err != nil {
		var se *sandbox.SetupError
		if errors.As(err, &se) {
			return nil, confinementError(err)
		}
		return nil, err
	}
	return p, nil
}

// confinementError says why a server did not start: its sandbox could not.
func confinementError(err error) error {
	return fmt.Errorf("stdio MCP servers run only in the os sandbox (bubblewrap), which could not start here (`babel doctor` says why): %w", err)
}

func (s *SandboxStarter) limits() sandbox.Limits { return s.Limits.Or(DefaultServerLimits()) }

var _ Starter = (*SandboxStarter)(nil)
