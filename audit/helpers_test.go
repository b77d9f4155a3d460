package audit_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/babelagent/babel/audit"
)

// testLog is a fresh log with its key kept in a separate directory.
type testLog struct {
	path    string
	keyPath string
	pub     ed25519.PublicKey
	w       *audit.Writer
}

func newTestLog(t testing.TB, opts *audit.Options) *testLog {
	t.Helper()
	l := &testLog{
		path:    filepath.Join(t.TempDir(), "data", "audit.db"),
		keyPath: filepath.Join(t.TempDir(), "keys", "audit.key"),
	}
	if opts == nil {
		opts = &audit.Options{}
	}
	opts.KeyPath = l.keyPath
	w, err := audit.Open(context.Background(), l.path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	l.w = w
	pub, err := audit.LoadPublicKey(audit.PublicKeyFile(l.keyPath))
	if err != nil {
		t.Fatalf("LoadPublicKey: %v", err)
	}
	l.pub = pub
	return l
}

func sampleRecord(i int) *audit.Record {
	return &audit.Record{
		Kind:      audit.KindNodeIntent,
		RunID:     fmt.Sprintf("run-%d", i%3),
		RootRunID: "root",
		TraceID:   "trace-1",
		SpanID:    fmt.Sprintf("span-%d", i),
		Principal: "alice",
		Agent:     "classifier",
		Node:      fmt.Sprintf("node-%d", i),
		Adapter:   "http",
		Args:      json.RawMessage(fmt.Sprintf(`{"n": %d, "b": [1, 2], "a": "x"}`, i)),
		Status:    "ok",
	}
}

// appendN appends n records one at a time, so each is its own batch.
func (l *testLog) appendN(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.w.Append(context.Background(), sampleRecord(i)); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
}

// raw opens the log file directly, as an attacker with file access would,
// with the append-only triggers dropped.
func (l *testLog) raw(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", l.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mustExec(t, db, `DROP TRIGGER IF EXISTS records_append_only_update`)
	mustExec(t, db, `DROP TRIGGER IF EXISTS records_append_only_delete`)
	return db
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func fixedClock() func() time.Time {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	return func() time.Time { return t0 }
}
