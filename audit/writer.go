package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrClosed is returned by Append on a Writer that has been closed.
var ErrClosed = errors.New("audit: writer closed")

// defaultMaxBatch bounds one commit. Bigger batches amortize the fsync
// further but hold every caller in the batch until the whole batch is on disk.
const defaultMaxBatch = 1024

// commitTimeout bounds one batch's transaction, so a wedged disk surfaces as
// errors to the callers rather than as callers blocked for ever.
const commitTimeout = 30 * time.Second

// Options configure Open. Either KeyPath or Key is required.
type Options struct {
	// KeyPath is the signing key file, loaded or created with
	// LoadOrCreateKey. Open refuses a path inside the log's directory
	// (ErrKeyInLogDir).
	KeyPath string
	// Key is a signing key the caller already holds, used instead of loading
	// KeyPath. If KeyPath is set too, it is taken as where Key lives and is
	// checked the same way.
	Key ed25519.PrivateKey
	// MaxBatch caps the records committed in one transaction; 0 means 1024.
	MaxBatch int
	// Now is the clock stamped on records; nil means time.Now. Timestamps
	// never go backwards along the log, whatever the clock does.
	Now func() time.Time
}

// Writer appends records to one audit log. It is the only thing that writes
// the log. Append may be called from many goroutines at once: a single
// goroutine owned by the Writer collects the records waiting at any moment
// into one transaction (group commit), so each caller pays for one fsync
// shared with everyone else in its batch. Close stops that goroutine.
type Writer struct {
	db       *sql.DB
	lock     *os.File  // held until Close; nil where unsupported
	insert1  *sql.Stmt // one row
	insertN  *sql.Stmt // insertRows rows
	args     []any     // reused by writeBatch
	key      ed25519.PrivateKey
	now      func() time.Time
	maxBatch int

	reqs      chan *request
	closing   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Owned by the run goroutine once Open returns.
	seq    int64
	last   string
	lastTS int64
	stale  bool
}

type request struct {
	ctx   context.Context
	rec   Record
	reply chan error
}

// Append writes r to the log and returns its sequence number once it is
// committed to disk. On success *r is updated to the record as stored (Seq,
// TS, canonical Args, ArgsDigest, PrevHash, Hash and, for the last record of
// a batch, Sig). On error the caller must not perform the action r records.
// An error after the record was handed to the writer (ctx done while
// waiting) can leave the record in the log, which is harmless: an intent
// with no outcome.
func (w *Writer) Append(ctx context.Context, r *Record) (int64, error) {
	rec, err := prepare(r)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("audit: append: %w", err)
	}
	req := &request{ctx: ctx, rec: rec, reply: make(chan error, 1)}
	select {
	case w.reqs <- req:
	case <-w.closing:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, fmt.Errorf("audit: append: %w", ctx.Err())
	}
	select {
	case err := <-req.reply:
		if err != nil {
			return 0, err
		}
	case <-w.done:
		// The writer stopped: it answered everything it took before it did.
		select {
		case err := <-req.reply:
			if err != nil {
				return 0, err
			}
		default:
			return 0, ErrClosed
		}
	case <-ctx.Done():
		return 0, fmt.Errorf("audit: append: %w (the record may still be committed)", ctx.Err())
	}
	*r = req.rec
	return r.Seq, nil
}

// Enqueue hands r to the writer without waiting for it to be committed:
// for records that gate nothing (the intent of a call with no consequential
// effect, an outcome). It still joins the chain in order, in the next batch.
// It blocks only while the writer's queue is full. If the batch later fails
// to commit, the next Append fails too, so a consequential action never runs
// on a log that is down.
func (w *Writer) Enqueue(ctx context.Context, r *Record) error {
	rec, err := prepare(r)
	if err != nil {
		return err
	}
	select {
	case <-w.closing:
		return ErrClosed
	default:
	}
	req := &request{ctx: context.WithoutCancel(ctx), rec: rec, reply: make(chan error, 1)}
	select {
	case w.reqs <- req:
		return nil
	case <-w.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("audit: enqueue: %w", ctx.Err())
	}
}

// Close stops the writer after the batch in flight, fails Appends still
// waiting with ErrClosed, and closes the database. It is safe to call more
// than once.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		close(w.closing)
		<-w.done
		w.insert1.Close()
		w.insertN.Close()
		if err := w.db.Close(); err != nil {
			w.closeErr = fmt.Errorf("audit: close: %w", err)
		}
		if w.lock != nil {
			w.lock.Close()
		}
	})
	return w.closeErr
}

var _ Sink = (*Writer)(nil)
