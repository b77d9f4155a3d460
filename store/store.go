// Package store is Babelagent's embedded SQLite store: runs and their
// checkpoints, approvals, and the kill switch, so that a restart loses
// nothing.
//
// Persisted state is versioned JSON, never code: loading it can fail with an
// error, never run anything. The store never holds a secret value (outputs
// are redacted by the kernel before they reach it) nor the audit log (that
// is its own file, written only by package audit).
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
)

const schema = `
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  graph TEXT NOT NULL,
  principal TEXT NOT NULL,
  status TEXT NOT NULL,
  input TEXT NOT NULL,
  result TEXT NOT NULL,
  checkpoint TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_principal ON runs(principal, created_at);
CREATE TABLE IF NOT EXISTS approvals (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  node TEXT NOT NULL,
  status TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_run ON approvals(run_id, node);
`

// formatVersion is written in meta; a store from another version is refused.
const formatVersion = "1"

// Store is the SQLite store. It is safe for concurrent use.
type Store struct {
	db      *sql.DB
	timeout time.Duration
	now     func() time.Time

	saves   chan *saveReq
	closing chan struct{}
	done    chan struct{}
}

// saveReq is one run waiting to be written by the group committer.
type saveReq struct {
	args  []any
	reply chan error
}

// Options configures Open. Nil means the defaults.
type Options struct {
	// ApprovalTimeout denies a request not decided in time (default 1h).
	ApprovalTimeout time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Open opens (creating if needed, mode 0600 in a 0700 directory) the store
// at path.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	} else {
		f.Close()
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	// One connection: writers queue in Go instead of sleeping in SQLite's
	// busy handler.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	var v string
	err = db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k='format'`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = db.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('format', ?)`, formatVersion)
	case err == nil && v != formatVersion:
		err = fmt.Errorf("format %q, want %q", v, formatVersion)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	s := &Store{db: db, timeout: time.Hour, now: time.Now,
		saves: make(chan *saveReq, 1024), closing: make(chan struct{}), done: make(chan struct{})}
	if opts != nil {
		if opts.ApprovalTimeout > 0 {
			s.timeout = opts.ApprovalTimeout
		}
		if opts.Now != nil {
			s.now = opts.Now
		}
	}
	go s.committer()
	return s, nil
}

// Close stops the committer after what it holds and closes the store.
func (s *Store) Close() error {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	<-s.done
	return s.db.Close()
}

const saveRunSQL = `INSERT INTO runs(id, graph, principal, status, input, result, checkpoint, source, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET status=excluded.status, result=excluded.result, checkpoint=excluded.checkpoint, updated_at=excluded.updated_at`

// committer writes the runs saved concurrently in one transaction (group
// commit), so many runs finishing at once share one commit.
func (s *Store) committer() {
	defer close(s.done)
	batch := make([]*saveReq, 0, 256)
	for {
		select {
		case r := <-s.saves:
			batch = append(batch[:0], r)
		case <-s.closing:
			for {
				select {
				case r := <-s.saves:
					s.commit([]*saveReq{r})
				default:
					return
				}
			}
		}
	collect:
		for len(batch) < cap(batch) {
			select {
			case r := <-s.saves:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		s.commit(batch)
		clear(batch)
	}
}

func (s *Store) commit(batch []*saveReq) {
	err := func() error {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		stmt, err := tx.Prepare(saveRunSQL)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range batch {
			if _, err := stmt.Exec(r.args...); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	for _, r := range batch {
		r.reply <- err
	}
}

// RunRecord is a persisted run.
type RunRecord struct {
	Result     *run.Result
	Input      agent.Message
	Checkpoint map[string]agent.Message
	// Source is the topology file the run came from ("" when served by name).
	Source string
}

// SaveRun writes (or replaces) a run with its input, checkpoint and the
// topology file it came from, and returns once it is committed.
func (s *Store) SaveRun(ctx context.Context, res *run.Result, input agent.Message, source string) error {
	return s.saveRun(ctx, res, input, source, true)
}

// QueueRun hands a finished run to the group committer without waiting for
// the commit: for runs nobody will resume (every terminal status). A run
// that waits for approval is saved with SaveRun.
func (s *Store) QueueRun(ctx context.Context, res *run.Result, input agent.Message, source string) error {
	return s.saveRun(ctx, res, input, source, false)
}

func (s *Store) saveRun(ctx context.Context, res *run.Result, input agent.Message, source string, wait bool) error {
	rb, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("store: encode run: %w", err)
	}
	ib, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("store: encode input: %w", err)
	}
	cb, err := json.Marshal(res.Checkpoint)
	if err != nil {
		return fmt.Errorf("store: encode checkpoint: %w", err)
	}
	now := s.now().UnixNano()
	req := &saveReq{args: []any{res.RunID, res.Graph, res.Principal, string(res.Status), ib, rb, cb, source, now, now}, reply: make(chan error, 1)}
	select {
	case s.saves <- req:
	case <-s.closing:
		return fmt.Errorf("store: save run %s: the store is closed", res.RunID)
	case <-ctx.Done():
		return fmt.Errorf("store: save run %s: %w", res.RunID, ctx.Err())
	}
	if !wait {
		return nil
	}
	if err := <-req.reply; err != nil {
		return fmt.Errorf("store: save run %s: %w", res.RunID, err)
	}
	return nil
}

// ErrNotFound is returned for an unknown run or approval.
var ErrNotFound = errors.New("not found")

// Run loads a run.
func (s *Store) Run(ctx context.Context, id string) (*RunRecord, error) {
	var rb, ib, cb, src string
	err := s.db.QueryRowContext(ctx, `SELECT result, input, checkpoint, source FROM runs WHERE id=?`, id).Scan(&rb, &ib, &cb, &src)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: load run %s: %w", id, err)
	}
	rec := &RunRecord{Result: &run.Result{}, Source: src}
	if err := json.Unmarshal([]byte(rb), rec.Result); err != nil {
		return nil, fmt.Errorf("store: run %s is corrupt: %w", id, err)
	}
	if err := json.Unmarshal([]byte(ib), &rec.Input); err != nil {
		return nil, fmt.Errorf("store: run %s input is corrupt: %w", id, err)
	}
	if err := json.Unmarshal([]byte(cb), &rec.Checkpoint); err != nil {
		return nil, fmt.Errorf("store: run %s checkpoint is corrupt: %w", id, err)
	}
	return rec, nil
}

// Runs lists the newest runs of a principal ("" for every principal).
func (s *Store) Runs(ctx context.Context, principal string, limit int) ([]*run.Result, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, `SELECT result FROM runs WHERE (?='' OR principal=?) ORDER BY created_at DESC LIMIT ?`, principal, principal, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	defer rows.Close()
	var out []*run.Result
	for rows.Next() {
		var rb string
		if err := rows.Scan(&rb); err != nil {
			return nil, err
		}
		r := &run.Result{}
		if err := json.Unmarshal([]byte(rb), r); err != nil {
			return nil, fmt.Errorf("store: a run is corrupt: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Killed reports whether the persisted kill switch is engaged.
func (s *Store) Killed(ctx context.Context) (bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k='kill'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return v == "engaged", err
}

// SetKilled persists the kill switch.
func (s *Store) SetKilled(ctx context.Context, engaged bool) error {
	v := "released"
	if engaged {
		v = "engaged"
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('kill', ?) ON CONFLICT(k) DO UPDATE SET v=excluded.v`, v)
	return err
}

var _ kernel.Approvals = (*Store)(nil)
