//go:build !linux

package mcp

import (
	"context"
	"errors"
	"io"
)

// Start refuses: a stdio server is started only where its process group
// can be killed and its exit watched without reaping (Linux).
func (ProcessStarter) Start(context.Context, *Command) (io.ReadWriteCloser, error) {
	return nil, errors.New("stdio MCP servers are started only on Linux")
}
