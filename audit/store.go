package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// formatVersion names the on-disk format; it is stored in the meta table.
const formatVersion = "babel.audit.v1"

// The triggers make an accidental UPDATE or DELETE fail loudly. They are not
// the protection against a deliberate one (whoever can write the file can
// drop them): the hash chain and signatures are.
const schema = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS records (
	seq             INTEGER PRIMARY KEY,
	ts              INTEGER NOT NULL,
	kind            TEXT NOT NULL,
	run_id          TEXT NOT NULL,
	root_run_id     TEXT NOT NULL,
	parent_run_id   TEXT NOT NULL,
	trace_id        TEXT NOT NULL,
	span_id         TEXT NOT NULL,
	principal       TEXT NOT NULL,
	agent           TEXT NOT NULL,
	node            TEXT NOT NULL,
	adapter         TEXT NOT NULL,
	args            TEXT NOT NULL,
	args_digest     TEXT NOT NULL,
	decision        TEXT NOT NULL,
	approver        TEXT NOT NULL,
	approval_digest TEXT NOT NULL,
	secret          TEXT NOT NULL,
	status          TEXT NOT NULL,
	result_digest   TEXT NOT NULL,
	error           TEXT NOT NULL,
	prev_hash       TEXT NOT NULL,
	hash            TEXT NOT NULL,
	sig             TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS records_run_id ON records (run_id);
CREATE INDEX IF NOT EXISTS records_root_run_id ON records (root_run_id);
CREATE TABLE IF NOT EXISTS head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  INTEGER NOT NULL,
	hash TEXT NOT NULL,
	sig  TEXT NOT NULL
) STRICT;
CREATE TRIGGER IF NOT EXISTS records_append_only_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS records_append_only_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
`

// recordColumns is the column list every reader and the writer use, in the
// order of scanRecord and the insert statement.
const recordColumns = `seq, ts, kind, run_id, root_run_id, parent_run_id, trace_id, span_id,
	principal, agent, node, adapter, args, args_digest, decision, approver, approval_digest,
	secret, status, result_digest, error, prev_hash, hash, sig`

const numColumns = 24

func dsn(path string, readOnly bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if readOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
		q.Add("_pragma", "mmap_size(1073741824)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}
	return u.String(), nil
}

// openReader opens an existing log read-only. It never creates a file.
func openReader(ctx context.Context, path string) (*sql.DB, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("audit: open log: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("audit: open log: %s is not a regular file", path)
	}
	name, err := dsn(path, true)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, fmt.Errorf("audit: open log: %w", err)
	}
	db.SetMaxOpenConns(1)
	var format string
	err = db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'format'`).Scan(&format)
	if err == nil && format != formatVersion {
		err = fmt.Errorf("format %q, want %q", format, formatVersion)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("audit: %s is not a babel audit log: %w", path, err)
	}
	return db, nil
}

// headMessage is what the head signature signs. The domain prefix keeps a
// record's batch signature (over 32 raw hash bytes) from passing for a head
// signature, so truncating the log back to an earlier batch cannot reuse it.
func headMessage(seq int64, hash string) []byte {
	return []byte("babel.audit.head.v1\x00" + strconv.FormatInt(seq, 10) + "\x00" + hash)
}

func signHead(key ed25519.PrivateKey, seq int64, hash string) string {
	return hex.EncodeToString(ed25519.Sign(key, headMessage(seq, hash)))
}

func verifyHead(pub ed25519.PublicKey, seq int64, hash, sig string) bool {
	s, err := hex.DecodeString(sig)
	return err == nil && len(s) == ed25519.SignatureSize && ed25519.Verify(pub, headMessage(seq, hash), s)
}

// head is the signed pointer to the last committed record.
type head struct {
	seq  int64
	hash string
	sig  string
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func readHead(ctx context.Context, q querier) (head, bool, error) {
	var h head
	err := q.QueryRowContext(ctx, `SELECT seq, hash, sig FROM head WHERE id = 1`).Scan(&h.seq, &h.hash, &h.sig)
	if errors.Is(err, sql.ErrNoRows) {
		return head{}, false, nil
	}
	if err != nil {
		return head{}, false, fmt.Errorf("audit: reading head: %w", err)
	}
	return h, true, nil
}
