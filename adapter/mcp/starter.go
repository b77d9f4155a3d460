package mcp

import (
	"context"
	"io"
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
