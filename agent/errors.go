package agent

import (
	"errors"
	"fmt"
)

// InputError says an agent's input is malformed. Field names the offending
// field when there is one. It is never retryable.
type InputError struct {
	Agent  string
	Field  string
	Reason string
}

func (e *InputError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: invalid input: field %q: %s", e.Agent, e.Field, e.Reason)
	}
	return fmt.Sprintf("%s: invalid input: %s", e.Agent, e.Reason)
}

// PeerError is a failure reported by something outside the process: an
// HTTP endpoint, an MCP server, an A2A agent, a model provider. Message is
// safe to show; the peer's own body is never included.
type PeerError struct {
	Peer      string // adapter and host, e.g. "http api.example.com"
	Status    int    // protocol status when there is one (HTTP status, JSON-RPC code)
	Message   string
	retryable bool
	Err       error
}

// NewPeerError builds a PeerError; retryable says whether trying again may help.
func NewPeerError(peer string, status int, retryable bool, msg string, err error) *PeerError {
	return &PeerError{Peer: peer, Status: status, Message: msg, retryable: retryable, Err: err}
}

func (e *PeerError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: %s (status %d)", e.Peer, e.Message, e.Status)
	}
	return fmt.Sprintf("%s: %s", e.Peer, e.Message)
}
func (e *PeerError) Unwrap() error   { return e.Err }
func (e *PeerError) Retryable() bool { return e.retryable }

// Retryable reports whether err says that trying again may succeed. An error
// is retryable only if something in its chain says so.
func Retryable(err error) bool {
	var r interface{ Retryable() bool }
	return errors.As(err, &r) && r.Retryable()
}

// PanicError is what a panic inside an agent becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("agent panicked: %v", e.Value) }
