package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/babelagent/babel/kernel"
)

// Check implements kernel.Approvals, in one transaction: it consumes a
// grant bound to exactly req.Digest, reports a refusal, or records req.
func (s *Store) Check(ctx context.Context, req *kernel.ApprovalRequest) (kernel.Decision, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return kernel.Decision{}, err
	}
	defer tx.Rollback()
	existing, err := scanApprovals(tx.QueryContext(ctx, `SELECT body FROM approvals WHERE run_id=? AND node=? ORDER BY created_at`, req.RunID, req.Node))
	if err != nil {
		return kernel.Decision{}, err
	}
	now := s.now()
	var d *kernel.Decision
	for _, a := range existing {
		before := a.Status
		if a.Status == kernel.StatusPending && now.Sub(a.CreatedAt) > s.timeout {
			a.Status, a.DecidedAt = kernel.StatusExpired, now
		}
		switch {
		case d != nil:
		case a.Digest != req.Digest:
			if a.Status == kernel.StatusPending || a.Status == kernel.StatusApproved {
				a.Status = kernel.StatusStale
			}
		case a.Status == kernel.StatusApproved:
			a.Status = kernel.StatusConsumed
			d = &kernel.Decision{Verdict: kernel.Approved, ApprovalID: a.ID, Approver: a.Approver}
		case a.Status == kernel.StatusDenied || a.Status == kernel.StatusExpired:
			d = &kernel.Decision{Verdict: kernel.Denied, ApprovalID: a.ID, Approver: a.Approver, Reason: "approval " + a.Status}
		case a.Status == kernel.StatusTerminated:
			d = &kernel.Decision{Verdict: kernel.Denied, ApprovalID: a.ID, Approver: a.Approver, Terminate: true, Reason: "run terminated by approver"}
		case a.Status == kernel.StatusPending:
			d = &kernel.Decision{Verdict: kernel.Pending, ApprovalID: a.ID}
		}
		if a.Status != before {
			if err := put(ctx, tx, a); err != nil {
				return kernel.Decision{}, err
			}
		}
	}
	if d == nil {
		r := *req
		r.ID, r.Status, r.CreatedAt = newID(), kernel.StatusPending, now
		if err := put(ctx, tx, &r); err != nil {
			return kernel.Decision{}, err
		}
		d = &kernel.Decision{Verdict: kernel.Pending, ApprovalID: r.ID}
	}
	if err := tx.Commit(); err != nil {
		return kernel.Decision{}, err
	}
	return *d, nil
}

func put(ctx context.Context, tx *sql.Tx, a *kernel.ApprovalRequest) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO approvals(id, run_id, node, status, body, created_at) VALUES (?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET status=excluded.status, body=excluded.body`,
		a.ID, a.RunID, a.Node, a.Status, string(b), a.CreatedAt.UnixNano())
	return err
}

// Approval loads one request.
func (s *Store) Approval(ctx context.Context, id string) (*kernel.ApprovalRequest, error) {
	var b string
	err := s.db.QueryRowContext(ctx, `SELECT body FROM approvals WHERE id=?`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	a := &kernel.ApprovalRequest{}
	if err := json.Unmarshal([]byte(b), a); err != nil {
		return nil, fmt.Errorf("approval %s is corrupt: %w", id, err)
	}
	return a, nil
}

// Approvals lists requests with the given status ("" for all), oldest first.
func (s *Store) Approvals(ctx context.Context, status string) ([]*kernel.ApprovalRequest, error) {
	return scanApprovals(s.db.QueryContext(ctx, `SELECT body FROM approvals WHERE (?='' OR status=?) ORDER BY created_at LIMIT 1000`, status, status))
}

// RunApprovals lists every request of one run, oldest first.
func (s *Store) RunApprovals(ctx context.Context, runID string) ([]*kernel.ApprovalRequest, error) {
	return scanApprovals(s.db.QueryContext(ctx, `SELECT body FROM approvals WHERE run_id=? ORDER BY created_at`, runID))
}

// scanApprovals decodes the bodies a query returned.
func scanApprovals(rows *sql.Rows, err error) ([]*kernel.ApprovalRequest, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*kernel.ApprovalRequest
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		a := &kernel.ApprovalRequest{}
		if err := json.Unmarshal([]byte(b), a); err != nil {
			return nil, fmt.Errorf("an approval record is corrupt: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Decide records a human decision ("approve", "deny", "terminate") bound to
// the digest the approver was shown.
func (s *Store) Decide(ctx context.Context, id, decision, digest, approver string) (*kernel.ApprovalRequest, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var b string
	err = tx.QueryRowContext(ctx, `SELECT body FROM approvals WHERE id=?`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("approval %s: %w", id, kernel.ErrNoSuchApproval)
	}
	if err != nil {
		return nil, err
	}
	a := &kernel.ApprovalRequest{}
	if err := json.Unmarshal([]byte(b), a); err != nil {
		return nil, fmt.Errorf("approval %s is corrupt: %w", id, err)
	}
	now := s.now()
	if a.Status == kernel.StatusPending && now.Sub(a.CreatedAt) > s.timeout {
		a.Status = kernel.StatusExpired
		_ = put(ctx, tx, a)
		_ = tx.Commit()
		return a, fmt.Errorf("approval %s expired (a timeout denies): %w", id, kernel.ErrNotPending)
	}
	if err := kernel.DecideRequest(a, decision, digest, approver, now); err != nil {
		return a, err
	}
	if err := put(ctx, tx, a); err != nil {
		return nil, err
	}
	return a, tx.Commit()
}

// VoidRun voids every pending or approved-but-unused request of a run
// ("" for every run): on cancel and on the kill switch.
func (s *Store) VoidRun(ctx context.Context, runID string) (int, error) {
	// Every open request, not a page of them: none may survive a kill.
	list, err := scanApprovals(s.db.QueryContext(ctx, `SELECT body FROM approvals WHERE status IN (?, ?) AND (?='' OR run_id=?)`,
		kernel.StatusPending, kernel.StatusApproved, runID, runID))
	if err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n := 0
	for _, a := range list {
		if (runID == "" || a.RunID == runID) && (a.Status == kernel.StatusPending || a.Status == kernel.StatusApproved) {
			a.Status = kernel.StatusVoided
			if err := put(ctx, tx, a); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, tx.Commit()
}

func newID() string { return "ap_" + randHex() + randHex() }
