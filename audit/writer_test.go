package audit_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/babelagent/babel/audit"
)

func TestAppendChainsRecordsAndFillsTheRecord(t *testing.T) {
	l := newTestLog(t, &audit.Options{Now: fixedClock()})
	var prev string = audit.GenesisHash
	for i := range 3 {
		r := sampleRecord(i)
		seq, err := l.w.Append(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if seq != int64(i+1) || r.Seq != seq {
			t.Fatalf("seq = %d, r.Seq = %d; want %d", seq, r.Seq, i+1)
		}
		if r.PrevHash != prev || r.Hash != r.ComputeHash() || r.Sig == "" {
			t.Fatalf("record %d = %+v", seq, r)
		}
		if !r.TS.Equal(fixedClock()()) {
			t.Fatalf("ts = %v", r.TS)
		}
		prev = r.Hash
	}
}

func TestAppendCanonicalizesArgs(t *testing.T) {
	l := newTestLog(t, nil)
	r := &audit.Record{Kind: audit.KindNodeIntent, RunID: "r1",
		Args: json.RawMessage("{ \"b\" : [1, 2.50, {\"d\":1,\"c\":\"<x>\"}],\n \"a\": null }")}
	if _, err := l.w.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := `{"a":null,"b":[1,2.50,{"c":"<x>","d":1}]}`
	if string(r.Args) != want || r.ArgsDigest != audit.Digest([]byte(want)) {
		t.Fatalf("args = %s digest %s; want %s", r.Args, r.ArgsDigest, want)
	}
	got, err := audit.Replay(context.Background(), l.path, "r1")
	if err != nil || len(got) != 1 || string(got[0].Args) != want {
		t.Fatalf("Replay = %+v, %v", got, err)
	}
}

func TestAppendRejectsMalformedRecords(t *testing.T) {
	l := newTestLog(t, nil)
	tests := []struct {
		name  string
		rec   *audit.Record
		field string
	}{
		{"no kind", &audit.Record{RunID: "r"}, "kind"},
		{"args not json", &audit.Record{Kind: "k", Args: json.RawMessage(`{"a":`)}, "args"},
		{"args with duplicate keys", &audit.Record{Kind: "k", Args: json.RawMessage(`{"a":1,"a":2}`)}, "args"},
		{"args digest that lies", &audit.Record{Kind: "k", Args: json.RawMessage(`{}`), ArgsDigest: audit.Digest([]byte("x"))}, "args_digest"},
		{"secret value instead of name", &audit.Record{Kind: audit.KindSecretUsed, Secret: "Bearer abc123"}, "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.w.Append(context.Background(), tt.rec)
			var fe *audit.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Append = %v; want a FieldError on %s", err, tt.field)
			}
		})
	}
	if _, err := l.w.Append(context.Background(), nil); err == nil {
		t.Fatal("Append(nil) succeeded")
	}
	rep, err := audit.Verify(context.Background(), l.path, l.pub)
	if err != nil || rep.Records != 0 {
		t.Fatalf("after rejected appends: %+v, %v", rep, err)
	}
}

func TestAppendTruncatesLongErrors(t *testing.T) {
	l := newTestLog(t, nil)
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'e'
	}
	r := &audit.Record{Kind: audit.KindNodeOutcome, Status: "failed", Error: string(long)}
	if _, err := l.w.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(r.Error) > 1024 {
		t.Fatalf("stored error is %d bytes", len(r.Error))
	}
}

// TestAppendFailsClosedWhenTheLogCannotBeWritten drops the records table
// behind the writer's back: every later Append must fail, so the kernel
// refuses the action.
func TestAppendFailsClosedWhenTheLogCannotBeWritten(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 2)
	db, err := sql.Open("sqlite", l.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db, `DROP TABLE records`)

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Go(func() {
			_, err := l.w.Append(context.Background(), sampleRecord(i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil {
			t.Fatal("Append succeeded on a log that cannot be written")
		}
	}
}

func TestOpenFailsWhereTheLogCannotBeCreated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := audit.Open(context.Background(), filepath.Join(file, "audit.db"),
		&audit.Options{KeyPath: filepath.Join(t.TempDir(), "audit.key")})
	if err == nil {
		t.Fatal("Open under a regular file succeeded")
	}
}

func TestAppendAfterCloseFails(t *testing.T) {
	l := newTestLog(t, nil)
	if err := l.w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.w.Append(context.Background(), sampleRecord(0)); !errors.Is(err, audit.ErrClosed) {
		t.Fatalf("Append after Close = %v; want ErrClosed", err)
	}
}

func TestAppendHonoursACancelledContext(t *testing.T) {
	l := newTestLog(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.w.Append(ctx, sampleRecord(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v; want context.Canceled", err)
	}
	rep, err := audit.Verify(context.Background(), l.path, l.pub)
	if err != nil || rep.Records != 0 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func TestConcurrentAppendsFormAContiguousChain(t *testing.T) {
	const goroutines, each = 50, 200
	l := newTestLog(t, nil)
	seqs := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				seq, err := l.w.Append(context.Background(), sampleRecord(g*each+i))
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				seqs[g] = append(seqs[g], seq)
			}
		})
	}
	wg.Wait()
	seen := make([]bool, goroutines*each+1)
	for _, ss := range seqs {
		for _, s := range ss {
			if s < 1 || s > goroutines*each || seen[s] {
				t.Fatalf("seq %d out of range or repeated", s)
			}
			seen[s] = true
		}
	}
	rep, err := audit.Verify(context.Background(), l.path, l.pub)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Records != goroutines*each || rep.LastSeq != goroutines*each {
		t.Fatalf("report = %+v", rep)
	}
	if rep.Signatures >= rep.Records {
		t.Errorf("%d signatures for %d records: no batching happened", rep.Signatures, rep.Records)
	}
	t.Logf("%d records in %d batches", rep.Records, rep.Signatures)

	// A deletion deep in the log (past the first few thousand rows Verify
	// reads in one chunk) is found too.
	l.w.Close()
	mustExec(t, l.raw(t), `DELETE FROM records WHERE seq = 9000`)
	_, err = audit.Verify(context.Background(), l.path, l.pub)
	var te *audit.TamperError
	if !errors.As(err, &te) || te.Problem != audit.ProblemMissing || te.Seq > 9000 || te.Seq < 9000-1024 {
		t.Fatalf("Verify after deleting seq 9000 = %v", err)
	}
}

func TestVerifyStopsWhenCancelled(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := audit.Verify(ctx, l.path, l.pub); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with a cancelled context = %v", err)
	}
}

func TestReopenedLogContinuesTheChain(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 3)
	if err := l.w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := audit.Open(context.Background(), l.path, &audit.Options{KeyPath: l.keyPath})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	seq, err := w.Append(context.Background(), sampleRecord(9))
	if err != nil || seq != 4 {
		t.Fatalf("Append after reopen = %d, %v", seq, err)
	}
	if _, err := audit.Verify(context.Background(), l.path, l.pub); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestOpenRefusesATruncatedLog(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 3)
	l.w.Close()
	mustExec(t, l.raw(t), `DELETE FROM records WHERE seq = 3`)
	_, err := audit.Open(context.Background(), l.path, &audit.Options{KeyPath: l.keyPath})
	var te *audit.TamperError
	if !errors.As(err, &te) {
		t.Fatalf("Open of a truncated log = %v; want a *TamperError", err)
	}
}

func TestOpenRefusesAnotherKey(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 1)
	l.w.Close()
	_, err := audit.Open(context.Background(), l.path, &audit.Options{KeyPath: filepath.Join(t.TempDir(), "other.key")})
	if err == nil {
		t.Fatal("Open with another key succeeded")
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 1)
	st, err := os.Stat(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("log mode %#o; want 0600", perm)
	}
	st, err = os.Stat(filepath.Dir(l.path))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o700 {
		t.Errorf("log directory mode %#o; want 0700", perm)
	}
	if matches, _ := filepath.Glob(l.path + "-*"); len(matches) > 0 {
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s mode %#o", m, st.Mode().Perm())
			}
		}
	}
}

func TestTimestampsNeverGoBackwards(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 10, 0, time.UTC)
	clock := func() time.Time { now = now.Add(-time.Second); return now }
	l := newTestLog(t, &audit.Options{Now: clock})
	var last time.Time
	for i := range 3 {
		r := sampleRecord(i)
		if _, err := l.w.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if r.TS.Before(last) {
			t.Fatalf("ts went back from %v to %v", last, r.TS)
		}
		last = r.TS
	}
}

func TestOpenRefusesASecondWriter(t *testing.T) {
	l := newTestLog(t, nil)
	if w, err := audit.Open(context.Background(), l.path, &audit.Options{KeyPath: l.keyPath}); err == nil {
		w.Close()
		t.Fatal("a second Writer opened the same log")
	}
	l.w.Close()
	w, err := audit.Open(context.Background(), l.path, &audit.Options{KeyPath: l.keyPath})
	if err != nil {
		t.Fatalf("Open after the first writer closed: %v", err)
	}
	w.Close()
}

func TestCloseWhileAppendingLosesNothingAcknowledged(t *testing.T) {
	l := newTestLog(t, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []int64
	for g := range 20 {
		wg.Go(func() {
			for i := range 50 {
				seq, err := l.w.Append(context.Background(), sampleRecord(g*50+i))
				if errors.Is(err, audit.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, seq)
				mu.Unlock()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := l.w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	rep, err := audit.Verify(context.Background(), l.path, l.pub)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, s := range acked {
		if s > rep.LastSeq {
			t.Fatalf("acknowledged seq %d is not in the log (last %d)", s, rep.LastSeq)
		}
	}
	if int64(len(acked)) != rep.Records {
		t.Fatalf("%d acknowledged, %d in the log", len(acked), rep.Records)
	}
}

func TestEnqueuedRecordsAreCommittedInOrderAndSurviveClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log", "audit.db")
	keyPath := filepath.Join(dir, "key", "audit.key")
	w, err := audit.Open(context.Background(), path, &audit.Options{KeyPath: keyPath})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := w.Enqueue(context.Background(), &audit.Record{Kind: "node.outcome", RunID: "r", Status: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := audit.Replay(context.Background(), path, "r")
	if err != nil || len(recs) != 100 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Status != fmt.Sprint(i) {
			t.Fatalf("record %d has status %s", i, r.Status)
		}
	}
	pub, _ := audit.LoadPublicKey(audit.PublicKeyFile(keyPath))
	if _, err := audit.Verify(context.Background(), path, pub); err != nil {
		t.Fatal(err)
	}
}
