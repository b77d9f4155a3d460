package kernel

import (
	"errors"
	"fmt"
)

// DeniedError says the kernel refused a call: policy, an undeclared effect,
// the Rule of Two without approval, a denied approval, the kill switch.
type DeniedError struct {
	Node   string
	Reason string
	// Terminate says the approver ended the whole run: no agent may carry
	// on past it (an LLM is not told and asked again; the run stops).
	Terminate bool
}

func (e *DeniedError) Error() string { return fmt.Sprintf("node %s: denied: %s", e.Node, e.Reason) }

// LimitError says a budget or limit was exhausted.
type LimitError struct {
	Limit string // "steps", "tokens", "deadline", "egress bytes", ...
	Max   int64
}

func (e *LimitError) Error() string {
	if e.Max > 0 {
		return fmt.Sprintf("limit exceeded: %s (max %d)", e.Limit, e.Max)
	}
	return "limit exceeded: " + e.Limit
}

// ApprovalPendingError says a call waits for a human decision.
type ApprovalPendingError struct {
	Node       string
	ApprovalID string
	Reason     string
	Digest     string
}

func (e *ApprovalPendingError) Error() string {
	return fmt.Sprintf("node %s: awaiting approval %s: %s", e.Node, e.ApprovalID, e.Reason)
}

// AuditError says the audit record of an action could not be written, so
// the action did not run.
type AuditError struct{ Err error }

func (e *AuditError) Error() string { return "audit log unavailable, action not run: " + e.Err.Error() }
func (e *AuditError) Unwrap() error { return e.Err }

// Permanent reports whether retrying err cannot help: kernel refusals,
// limits, pending approvals and malformed input.
func Permanent(err error) bool {
	var d *DeniedError
	var l *LimitError
	var a *ApprovalPendingError
	var au *AuditError
	return errors.As(err, &d) || errors.As(err, &l) || errors.As(err, &a) || errors.As(err, &au)
}
