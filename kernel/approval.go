package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// ApprovalRequest is the exact call a human is asked to approve.
type ApprovalRequest struct {
	ID          string          `json:"id"`
	RunID       string          `json:"run_id"`
	RootRunID   string          `json:"root_run_id"`
	Graph       string          `json:"graph"`
	Node        string          `json:"node"`
	Agent       string          `json:"agent"`
	Adapter     string          `json:"adapter"`
	Destination []string        `json:"destination"`
	Effects     []string        `json:"effects"`
	Args        json.RawMessage `json:"args"`
	// Digest binds a decision to this exact call: node, agent, destination
	// and canonical arguments. A call whose digest differs is a new call.
	Digest    string    `json:"digest"`
	Reason    string    `json:"reason"`
	Principal string    `json:"principal"`
	Untrusted bool      `json:"untrusted"`
	CreatedAt time.Time `json:"created_at"`
	// Status is pending, approved, denied, terminated, expired, consumed,
	// voided or stale.
	Status    string    `json:"status"`
	Approver  string    `json:"approver,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// Verdict is the outcome of an approval check.
type Verdict int

const (
	Pending Verdict = iota
	Approved
	Denied
)

// Decision is the answer to an approval check.
type Decision struct {
	Verdict    Verdict
	ApprovalID string
	Approver   string
	// Terminate asks that the whole run end (the approver chose terminate).
	Terminate bool
	Reason    string
}

// Approvals decides whether a consequential call may run.
type Approvals interface {
	// Check consumes a grant bound to exactly req.Digest (Approved, single
	// use), reports a refusal (Denied), or records req as waiting (Pending,
	// with its ID). It never blocks waiting for a human.
	Check(ctx context.Context, req *ApprovalRequest) (Decision, error)
}

// Approval statuses.
const (
	StatusPending    = "pending"
	StatusApproved   = "approved"
	StatusDenied     = "denied"
	StatusTerminated = "terminated"
	StatusExpired    = "expired"
	StatusConsumed   = "consumed"
	StatusVoided     = "voided"
	StatusStale      = "stale"
)

// MemoryApprovals keeps approvals in memory: for tests and for one-shot
// CLI runs. A server uses the SQLite store, which survives a restart.
type MemoryApprovals struct {
	mu      sync.Mutex
	byID    map[string]*ApprovalRequest
	order   []string
	timeout time.Duration
	now     func() time.Time
	newID   func() string
}

// NewMemoryApprovals returns an empty store; requests not decided within
// timeout are denied (0 means one hour).
func NewMemoryApprovals(timeout time.Duration) *MemoryApprovals {
	if timeout <= 0 {
		timeout = time.Hour
	}
	return &MemoryApprovals{byID: map[string]*ApprovalRequest{}, timeout: timeout, now: time.Now, newID: newID}
}

// Check implements Approvals.
func (m *MemoryApprovals) Check(_ context.Context, req *ApprovalRequest) (Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, id := range m.order {
		a := m.byID[id]
		if a.RunID != req.RunID || a.Node != req.Node {
			continue
		}
		if a.Status == StatusPending && now.Sub(a.CreatedAt) > m.timeout {
			a.Status, a.DecidedAt = StatusExpired, now
		}
		switch {
		case a.Digest != req.Digest:
			if a.Status == StatusPending || a.Status == StatusApproved {
				a.Status = StatusStale // the call changed: this decision no longer applies
			}
		case a.Status == StatusApproved:
			a.Status = StatusConsumed
			return Decision{Verdict: Approved, ApprovalID: a.ID, Approver: a.Approver}, nil
		case a.Status == StatusDenied, a.Status == StatusExpired:
			return Decision{Verdict: Denied, ApprovalID: a.ID, Approver: a.Approver, Reason: "approval " + a.Status}, nil
		case a.Status == StatusTerminated:
			return Decision{Verdict: Denied, ApprovalID: a.ID, Approver: a.Approver, Terminate: true, Reason: "run terminated by approver"}, nil
		case a.Status == StatusPending:
			return Decision{Verdict: Pending, ApprovalID: a.ID}, nil
		}
	}
	r := *req
	r.ID, r.Status, r.CreatedAt = m.newID(), StatusPending, now
	m.byID[r.ID] = &r
	m.order = append(m.order, r.ID)
	return Decision{Verdict: Pending, ApprovalID: r.ID}, nil
}

// Decide records a human decision ("approve", "deny" or "terminate") on a
// pending request. digest must be the digest the approver was shown: if
// the call changed since, the decision is refused as stale.
func (m *MemoryApprovals) Decide(id, decision, digest, approver string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.byID[id]
	if !ok {
		return fmt.Errorf("approval %s: %w", id, ErrNoSuchApproval)
	}
	return decide(a, decision, digest, approver, m.now())
}

// List returns every request, oldest first.
func (m *MemoryApprovals) List() []ApprovalRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ApprovalRequest, 0, len(m.order))
	for _, id := range m.order {
		out = append(out, *m.byID[id])
	}
	return out
}

// VoidRun voids every pending request of a run (cancel, kill).
func (m *MemoryApprovals) VoidRun(runID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, a := range m.byID {
		if (a.RunID == runID || runID == "") && (a.Status == StatusPending || a.Status == StatusApproved) {
			a.Status = StatusVoided
			n++
		}
	}
	return n
}

// decide applies a decision to a; shared by every store.
func decide(a *ApprovalRequest, decision, digest, approver string, now time.Time) error {
	if a.Status != StatusPending {
		return fmt.Errorf("approval %s is %s, not pending: %w", a.ID, a.Status, ErrNotPending)
	}
	if digest != a.Digest {
		return fmt.Errorf("approval %s: the call changed since it was shown (digest mismatch): %w", a.ID, ErrStale)
	}
	switch decision {
	case "approve":
		a.Status = StatusApproved
	case "deny":
		a.Status = StatusDenied
	case "terminate":
		a.Status = StatusTerminated
	default:
		return fmt.Errorf("decision %q: want approve, deny or terminate", decision)
	}
	a.Approver, a.DecidedAt = approver, now
	return nil
}

// DecideRequest applies a decision to a request held by a store other
// than MemoryApprovals (the SQLite store uses it inside its transaction).
func DecideRequest(a *ApprovalRequest, decision, digest, approver string, now time.Time) error {
	return decide(a, decision, digest, approver, now)
}

// Errors from deciding an approval.
var (
	ErrNoSuchApproval = fmt.Errorf("no such approval")
	ErrNotPending     = fmt.Errorf("approval is not pending")
	ErrStale          = fmt.Errorf("approval is stale")
)
