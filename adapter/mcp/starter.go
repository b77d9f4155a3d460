package mcp

import (
	"context"
	"io"
	"time"
)

// Command is a stdio server to start.
type Command struct {
	// Path is the program's absolute path.
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
// — it closes its input, waits briefly for it to exit, then kills its whole
// process group — and returns once nothing of it is left. When ctx ends the
// process group is killed at once. Start must be safe for concurrent use.
//
// The sandbox package is where confinement belongs; a Starter that runs the
// server under bubblewrap replaces ProcessStarter without changing this
// package.
type Starter interface {
	Start(ctx context.Context, cmd *Command) (io.ReadWriteCloser, error)
}

// ProcessStarter starts a stdio server as a direct child process: its own
// process group, the explicit environment of the Command and nothing else,
// "/" as its working directory, and SIGKILL should this process die first.
// It does not confine the server; it is the stopgap until the sandbox
// package can run a long-lived process with pipes. It needs Linux.
type ProcessStarter struct {
	// Grace is how long Close waits for the server to exit once its input
	// is closed, and again after SIGTERM, before killing its process group
	// (default 500ms).
	Grace time.Duration
}

var _ Starter = ProcessStarter{}
