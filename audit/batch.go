package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// run is the writer goroutine: it takes every request waiting at the moment
// (up to maxBatch) and commits them as one transaction.
func (w *Writer) run() {
	defer close(w.done)
	batch := make([]*request, 0, w.maxBatch)
	for {
		select {
		case <-w.closing:
			// Commit what was already handed over (Enqueue does not wait):
			// nothing accepted is dropped at shutdown.
			for {
				batch = batch[:0]
			drain:
				for len(batch) < w.maxBatch {
					select {
					case r := <-w.reqs:
						batch = append(batch, r)
					default:
						break drain
					}
				}
				if len(batch) == 0 {
					return
				}
				w.commit(batch)
				clear(batch)
			}
		case r := <-w.reqs:
			batch = append(batch[:0], r)
		}
	collect:
		for len(batch) < w.maxBatch {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		w.commit(batch)
		clear(batch)
	}
}

// commit writes one batch and answers every request in it. The writer's
// idea of where the chain ends moves only when the transaction commits.
func (w *Writer) commit(batch []*request) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.reply <- fmt.Errorf("audit: append: %w", err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if err := w.writeBatch(live); err != nil {
		w.stale = true
		for _, r := range live {
			r.reply <- err
		}
		return
	}
	for _, r := range live {
		r.reply <- nil
	}
}

func (w *Writer) writeBatch(live []*request) error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if w.stale {
		if err := w.resync(ctx); err != nil {
			return err
		}
		w.stale = false
	}
	ts := max(w.now().UnixNano(), w.lastTS)
	stamp := time.Unix(0, ts).UTC()
	seq, prev := w.seq, w.last
	for _, r := range live {
		seq++
		r.rec.Seq, r.rec.TS, r.rec.PrevHash = seq, stamp, prev
		r.rec.Hash = r.rec.ComputeHash()
		prev = r.rec.Hash
	}
	last := &live[len(live)-1].rec
	hb, err := hex.DecodeString(last.Hash)
	if err != nil {
		return fmt.Errorf("audit: append: %w", err)
	}
	last.Sig = hex.EncodeToString(ed25519.Sign(w.key, hb))
	headSig := signHead(w.key, seq, prev)

	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit: append: begin: %w", err)
	}
	defer tx.Rollback()
	for rest := live; len(rest) > 0; {
		stmt, n := w.insert1, 1
		if len(rest) >= insertRows {
			stmt, n = w.insertN, insertRows
		}
		w.args = w.args[:0]
		for _, r := range rest[:n] {
			c := &r.rec
			w.args = append(w.args, c.Seq, ts, c.Kind, c.RunID, c.RootRunID, c.ParentRunID,
				c.TraceID, c.SpanID, c.Principal, c.Agent, c.Node, c.Adapter, string(c.Args), c.ArgsDigest,
				c.Decision, c.Approver, c.ApprovalDigest, c.Secret, c.Status, c.ResultDigest, c.Error,
				c.PrevHash, c.Hash, c.Sig)
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, w.args...); err != nil {
			return fmt.Errorf("audit: append: insert seq %d to %d: %w", rest[0].rec.Seq, rest[n-1].rec.Seq, err)
		}
		rest = rest[n:]
	}
	clear(w.args) // drop references to the batch's strings
	// The seq guard makes a head moved by anyone else fail this batch
	// rather than be silently overwritten.
	res, err := tx.ExecContext(ctx, `UPDATE head SET seq = ?, hash = ?, sig = ? WHERE id = 1 AND seq = ? AND hash = ?`,
		seq, prev, headSig, w.seq, w.last)
	if err != nil {
		return fmt.Errorf("audit: append: head: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("audit: append: the log's head moved under the writer (rows %d, %v)", n, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("audit: append: commit: %w", err)
	}
	w.seq, w.last, w.lastTS = seq, prev, ts
	return nil
}

// insertRows is how many rows one multi-row INSERT carries: fewer trips
// through database/sql per batch, well under SQLite's bound-parameter limit.
const insertRows = 32

func insertSQL(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO records (" + recordColumns + ") VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?" + strings.Repeat(",?", numColumns-1) + ")")
	}
	return b.String()
}

// resync reloads where the chain ends after a failed batch, whose commit
// may or may not have reached the disk.
func (w *Writer) resync(ctx context.Context) error {
	h, ok, err := readHead(ctx, w.db)
	if err != nil {
		return fmt.Errorf("audit: append: %w", err)
	}
	if !ok {
		return fmt.Errorf("audit: append: the log has no head")
	}
	if !verifyHead(w.key.Public().(ed25519.PublicKey), h.seq, h.hash, h.sig) {
		return fmt.Errorf("audit: append: the log's head signature does not verify")
	}
	w.seq, w.last = h.seq, h.hash
	return nil
}
