package audit

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Export writes every record of the log at path to w as JSON Lines, one
// Record per line in seq order, for a SIEM or an archive. It does not
// verify the log; run Verify first when the answer matters.
func Export(ctx context.Context, path string, w io.Writer) error {
	db, err := openReader(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT `+recordColumns+` FROM records ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	defer rows.Close()
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var r Record
	for rows.Next() {
		if err := scanRecord(rows, &r); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		if err := enc.Encode(&r); err != nil {
			return fmt.Errorf("audit: export: seq %d (run verify): %w", r.Seq, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	return nil
}

// Replay returns the trajectory of run runID: every record whose run_id or
// root_run_id is runID (so a root run's trajectory includes its sub-agents'
// runs), in seq order. It does not verify the log; run Verify first when the
// answer matters.
func Replay(ctx context.Context, path, runID string) ([]Record, error) {
	if runID == "" {
		return nil, fmt.Errorf("audit: replay: empty run id")
	}
	db, err := openReader(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT `+recordColumns+` FROM records
		WHERE run_id = ?1 OR root_run_id = ?1 ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("audit: replay: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		if err := scanRecord(rows, &r); err != nil {
			return nil, fmt.Errorf("audit: replay: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: replay: %w", err)
	}
	return out, nil
}

func scanRecord(rows *sql.Rows, r *Record) error {
	var ts int64
	var args string
	if err := rows.Scan(&r.Seq, &ts, &r.Kind, &r.RunID, &r.RootRunID, &r.ParentRunID, &r.TraceID,
		&r.SpanID, &r.Principal, &r.Agent, &r.Node, &r.Adapter, &args, &r.ArgsDigest, &r.Decision,
		&r.Approver, &r.ApprovalDigest, &r.Secret, &r.Status, &r.ResultDigest, &r.Error,
		&r.PrevHash, &r.Hash, &r.Sig); err != nil {
		return err
	}
	r.TS = time.Unix(0, ts).UTC()
	r.Args = nil
	if args != "" {
		r.Args = json.RawMessage(args)
	}
	return nil
}
