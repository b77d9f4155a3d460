package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Open opens the audit log at path for appending, creating it (file mode
// 0600, its directory 0700 when Open creates it) if it does not exist. It
// refuses a log that was signed with another key, and one whose signed head
// does not match its last record (a *TamperError: run Verify).
func Open(ctx context.Context, path string, opts *Options) (*Writer, error) {
	if opts == nil || (opts.KeyPath == "" && len(opts.Key) == 0) {
		return nil, errors.New("audit: open log: a signing key (Options.KeyPath or Options.Key) is required")
	}
	if path == "" {
		return nil, errors.New("audit: open log: empty path")
	}
	key := opts.Key
	if opts.KeyPath != "" {
		inside, err := keyInsideDir(opts.KeyPath, filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		if inside {
			return nil, fmt.Errorf("%w: key %s, log %s", ErrKeyInLogDir, opts.KeyPath, path)
		}
		if len(key) == 0 {
			if key, err = LoadOrCreateKey(opts.KeyPath); err != nil {
				return nil, err
			}
		}
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("audit: open log: signing key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if err := createFile(path); err != nil {
		return nil, err
	}
	lock, err := lockLog(path)
	if err != nil {
		return nil, err
	}
	w, err := open(ctx, path, key, opts)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	w.lock = lock
	go w.run()
	return w, nil
}

func open(ctx context.Context, path string, key ed25519.PrivateKey, opts *Options) (*Writer, error) {
	name, err := dsn(path, false)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, fmt.Errorf("audit: open log: %w", err)
	}
	db.SetMaxOpenConns(1) // one writer connection; readers open their own
	w := &Writer{
		db:       db,
		key:      key,
		now:      opts.Now,
		maxBatch: opts.MaxBatch,
		reqs:     make(chan *request, 4096),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.maxBatch <= 0 {
		w.maxBatch = defaultMaxBatch
	}
	if err := w.setup(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if w.insert1, err = db.PrepareContext(ctx, insertSQL(1)); err == nil {
		w.insertN, err = db.PrepareContext(ctx, insertSQL(insertRows))
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("audit: open log: %w", err)
	}
	return w, nil
}

// createFile creates path 0600 (and its directory 0700) if missing, and takes
// group and other permissions off an existing file.
func createFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("audit: open log: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("audit: open log: %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("audit: open log: %w", err)
		}
	}
	return nil
}

// setup creates the schema and genesis head on a new log, and on any log
// checks the key and the head, then loads where the chain ends.
func (w *Writer) setup(ctx context.Context) error {
	pub := hex.EncodeToString(w.key.Public().(ed25519.PublicKey))
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("audit: open log: creating schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('format', ?), ('public_key', ?)
		ON CONFLICT (key) DO NOTHING`, formatVersion, pub); err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	var format, logPub string
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'format'),
		(SELECT value FROM meta WHERE key = 'public_key')`).Scan(&format, &logPub); err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	if format != formatVersion {
		return fmt.Errorf("audit: open log: format %q, want %q", format, formatVersion)
	}
	if logPub != pub {
		return fmt.Errorf("audit: open log: the log was signed with public key %s, not this writer's %s", logPub, pub)
	}
	h, ok, err := readHead(ctx, tx)
	if err != nil {
		return err
	}
	if !ok {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records`).Scan(&n); err != nil {
			return fmt.Errorf("audit: open log: %w", err)
		}
		if n > 0 {
			return &TamperError{Seq: 0, Problem: ProblemHeadMissing, Detail: "the log has records but no head"}
		}
		h = head{seq: 0, hash: GenesisHash, sig: signHead(w.key, 0, GenesisHash)}
		if _, err := tx.ExecContext(ctx, `INSERT INTO head (id, seq, hash, sig) VALUES (1, ?, ?, ?)`,
			h.seq, h.hash, h.sig); err != nil {
			return fmt.Errorf("audit: open log: %w", err)
		}
	}
	if !verifyHead(w.key.Public().(ed25519.PublicKey), h.seq, h.hash, h.sig) {
		return &TamperError{Seq: h.seq, Problem: ProblemBadHead, Detail: "the head's signature does not verify"}
	}
	var lastSeq, lastTS int64
	lastHash := GenesisHash
	err = tx.QueryRowContext(ctx, `SELECT seq, ts, hash FROM records ORDER BY seq DESC LIMIT 1`).Scan(&lastSeq, &lastTS, &lastHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("audit: open log: %w", err)
	}
	if lastSeq != h.seq || lastHash != h.hash {
		return &TamperError{Seq: min(lastSeq, h.seq) + 1, Problem: ProblemHeadMismatch,
			Detail: fmt.Sprintf("the signed head names seq %d but the last record is seq %d; run verify", h.seq, lastSeq)}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	w.seq, w.last, w.lastTS = h.seq, h.hash, lastTS
	return nil
}
