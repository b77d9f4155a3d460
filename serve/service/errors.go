package service

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is a stable, machine-readable error code. Callers branch on codes,
// never on messages.
type Code string

const (
	CodeBadRequest     Code = "bad_request"      // malformed request
	CodeInvalidJSON    Code = "invalid_json"     // the body is not JSON
	CodeInvalidInput   Code = "invalid_input"    // the input does not match the graph's input schema
	CodeInvalidLimit   Code = "invalid_deadline" // deadline_s is not a finite number of seconds > 0
	CodeBodyTooLarge   Code = "body_too_large"   // the body is over the cap
	CodeUnauthorized   Code = "unauthorized"     // no or wrong bearer token
	CodeForbidden      Code = "forbidden"        // the principal may not do this, or the request came from elsewhere
	CodeNotFound       Code = "not_found"        // no such graph or run (or not the caller's)
	CodeNotCancellable Code = "not_cancellable"  // the run already finished
	CodeRateLimited    Code = "rate_limited"     // the principal is over its rate
	CodeBusy           Code = "busy"             // too many runs at once
	CodeShuttingDown   Code = "shutting_down"    // the server is stopping
	CodeNotImplemented Code = "not_implemented"  // not built yet
	CodeInternal       Code = "internal"         // anything else; details are in the server log

	// Codes a finished run may carry.
	CodeNodeFailed       Code = "node_failed"
	CodeLimitExceeded    Code = "limit_exceeded"
	CodeDenied           Code = "denied"
	CodeCancelled        Code = "cancelled"
	CodeAwaitingApproval Code = "awaiting_approval"
	CodeOutputTooLarge   Code = "output_too_large"
	CodeOutputTooDeep    Code = "output_too_deep"
)

// Error is what a caller of any door sees when something goes wrong: a
// stable code, a message that is safe to show, and the HTTP status that
// goes with it. The internal cause, if any, is kept in Err for the server
// log and never rendered by Error().
type Error struct {
	Code    Code
	Status  int
	Message string
	// RetryAfter is set for rate_limited and busy.
	RetryAfter time.Duration
	// Err is the internal cause: logged, never shown.
	Err error
}

// Error returns the safe message only.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Err }

func newError(code Code, status int, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400 error with a safe message.
func BadRequest(code Code, format string, args ...any) *Error {
	return newError(code, http.StatusBadRequest, format, args...)
}

// ErrNotFound is returned for a graph or run that does not exist or that
// the caller may not see: the two are indistinguishable on purpose.
var ErrNotFound = &Error{Code: CodeNotFound, Status: http.StatusNotFound, Message: "not found"}

// ErrShuttingDown is returned once Close has been called.
var ErrShuttingDown = &Error{Code: CodeShuttingDown, Status: http.StatusServiceUnavailable,
	Message: "the server is shutting down", RetryAfter: time.Second}

// AsError returns err as an *Error: typed errors as they are, anything else
// as an internal error whose message says nothing about the cause.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Status: http.StatusInternalServerError, Message: "internal error", Err: err}
}

// NewCorrelationID returns a fresh random id that ties what a caller sees to
// the server's log line.
func NewCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
