package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/babelagent/babel/audit"
)

func TestVerifyAcceptsAnUntouchedLog(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 10)
	rep, err := audit.Verify(context.Background(), l.path, l.pub)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Records != 10 || rep.LastSeq != 10 || rep.Verified != 10 || rep.HeadSeq != 10 || rep.HeadHash != rep.LastHash {
		t.Fatalf("report = %+v", rep)
	}
}

func TestVerifyAcceptsAnEmptyLog(t *testing.T) {
	l := newTestLog(t, nil)
	rep, err := audit.Verify(context.Background(), l.path, l.pub)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Records != 0 || rep.HeadSeq != 0 || rep.HeadHash != audit.GenesisHash {
		t.Fatalf("report = %+v", rep)
	}
}

// records reads the log back through Export, as an attacker could read it.
func records(t *testing.T, path string) []audit.Record {
	t.Helper()
	var buf bytes.Buffer
	if err := audit.Export(context.Background(), path, &buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	var out []audit.Record
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var r audit.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// insertRecord writes r as a row, bypassing the Writer.
func insertRecord(t *testing.T, db *sql.DB, r *audit.Record) {
	t.Helper()
	mustExec(t, db, `INSERT INTO records (seq, ts, kind, run_id, root_run_id, parent_run_id, trace_id, span_id,
		principal, agent, node, adapter, args, args_digest, decision, approver, approval_digest,
		secret, status, result_digest, error, prev_hash, hash, sig)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.Seq, r.TS.UnixNano(), r.Kind, r.RunID, r.RootRunID, r.ParentRunID, r.TraceID, r.SpanID,
		r.Principal, r.Agent, r.Node, r.Adapter, string(r.Args), r.ArgsDigest, r.Decision, r.Approver,
		r.ApprovalDigest, r.Secret, r.Status, r.ResultDigest, r.Error, r.PrevHash, r.Hash, r.Sig)
}

// forge makes a well-formed record that follows prev, without a signature:
// everything an attacker without the key can do.
func forge(prev audit.Record) *audit.Record {
	f := prev
	f.Seq = prev.Seq + 1
	f.Kind = audit.KindApprovalDecided
	f.Decision, f.Approver = "approve", "mallory"
	f.PrevHash, f.Sig = prev.Hash, ""
	f.Hash = f.ComputeHash()
	return &f
}

func TestVerifyDetectsTampering(t *testing.T) {
	const n = 10
	tests := []struct {
		name    string
		tamper  func(t *testing.T, db *sql.DB, recs []audit.Record)
		seq     int64
		problem string
	}{
		{
			name: "edited field",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `UPDATE records SET principal = 'mallory' WHERE seq = 4`)
			},
			seq: 4, problem: audit.ProblemHashMismatch,
		},
		{
			name: "edited args with a matching digest",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				args := []byte(`{"rm":"-rf"}`)
				mustExec(t, db, `UPDATE records SET args = ?, args_digest = ? WHERE seq = 6`, string(args), audit.Digest(args))
			},
			seq: 6, problem: audit.ProblemHashMismatch,
		},
		{
			name: "edited and every later hash recomputed",
			tamper: func(t *testing.T, db *sql.DB, recs []audit.Record) {
				prev := recs[2].Hash
				for i := 3; i < len(recs); i++ {
					r := recs[i]
					if i == 3 {
						r.Principal = "mallory"
					}
					r.PrevHash = prev
					r.Hash = r.ComputeHash()
					prev = r.Hash
					mustExec(t, db, `UPDATE records SET principal = ?, prev_hash = ?, hash = ? WHERE seq = ?`,
						r.Principal, r.PrevHash, r.Hash, r.Seq)
				}
				mustExec(t, db, `UPDATE head SET hash = ?`, prev)
			},
			seq: 4, problem: audit.ProblemBadSignature,
		},
		{
			name: "deleted record",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `DELETE FROM records WHERE seq = 4`)
			},
			seq: 4, problem: audit.ProblemMissing,
		},
		{
			name: "first record deleted",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `DELETE FROM records WHERE seq = 1`)
			},
			seq: 1, problem: audit.ProblemMissing,
		},
		{
			name: "forged record appended",
			tamper: func(t *testing.T, db *sql.DB, recs []audit.Record) {
				insertRecord(t, db, forge(recs[n-1]))
			},
			seq: n + 1, problem: audit.ProblemUnsigned,
		},
		{
			name: "forged record appended with a made-up signature",
			tamper: func(t *testing.T, db *sql.DB, recs []audit.Record) {
				f := forge(recs[n-1])
				f.Sig = recs[n-1].Sig
				insertRecord(t, db, f)
			},
			seq: n + 1, problem: audit.ProblemBadSignature,
		},
		{
			name: "forged record inserted in the middle",
			tamper: func(t *testing.T, db *sql.DB, recs []audit.Record) {
				mustExec(t, db, `UPDATE records SET seq = -seq WHERE seq >= 5`)
				mustExec(t, db, `UPDATE records SET seq = 1 - seq WHERE seq < 0`)
				insertRecord(t, db, forge(recs[3]))
			},
			seq: 5, problem: audit.ProblemChainBroken,
		},
		{
			name: "two records swapped",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `UPDATE records SET seq = -1 WHERE seq = 3`)
				mustExec(t, db, `UPDATE records SET seq = 3 WHERE seq = 6`)
				mustExec(t, db, `UPDATE records SET seq = 6 WHERE seq = -1`)
			},
			seq: 3, problem: audit.ProblemChainBroken,
		},
		{
			name: "tail truncated",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `DELETE FROM records WHERE seq >= 8`)
			},
			seq: 8, problem: audit.ProblemTruncated,
		},
		{
			name: "tail truncated and head moved back",
			tamper: func(t *testing.T, db *sql.DB, recs []audit.Record) {
				mustExec(t, db, `DELETE FROM records WHERE seq >= 8`)
				mustExec(t, db, `UPDATE head SET seq = 7, hash = ?`, recs[6].Hash)
			},
			seq: 8, problem: audit.ProblemBadHead,
		},
		{
			name: "tail truncated and head moved back with the batch signature",
			tamper: func(t *testing.T, db *sql.DB, recs []audit.Record) {
				mustExec(t, db, `DELETE FROM records WHERE seq >= 8`)
				mustExec(t, db, `UPDATE head SET seq = 7, hash = ?, sig = ?`, recs[6].Hash, recs[6].Sig)
			},
			seq: 8, problem: audit.ProblemBadHead,
		},
		{
			name: "every record deleted",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `DELETE FROM records`)
			},
			seq: 1, problem: audit.ProblemTruncated,
		},
		{
			name: "head deleted",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `DELETE FROM head`)
			},
			seq: n + 1, problem: audit.ProblemHeadMissing,
		},
		{
			name: "a field holding the packing separator",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `UPDATE records SET node = CAST(x'41FF42' AS TEXT) WHERE seq = 5`)
			},
			seq: 5, problem: audit.ProblemMalformed,
		},
		{
			name: "a field moved into its neighbour across a NULL",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				// Drop the NOT NULL constraints, as an attacker with the file can.
				mustExec(t, db, `CREATE TABLE loose AS SELECT * FROM records`)
				mustExec(t, db, `DROP TABLE records`)
				mustExec(t, db, `ALTER TABLE loose RENAME TO records`)
				mustExec(t, db, `UPDATE records SET node = agent || CAST(x'FF' AS TEXT) || node, agent = NULL WHERE seq = 5`)
			},
			seq: 5, problem: audit.ProblemMalformed,
		},
		{
			name: "ts made text",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `CREATE TABLE loose AS SELECT * FROM records`)
				mustExec(t, db, `DROP TABLE records`)
				mustExec(t, db, `ALTER TABLE loose RENAME TO records`)
				mustExec(t, db, `UPDATE records SET ts = 'soon' WHERE seq = 2`)
			},
			seq: 2, problem: audit.ProblemMalformed,
		},
		{
			name: "signature removed from the last record",
			tamper: func(t *testing.T, db *sql.DB, _ []audit.Record) {
				mustExec(t, db, `UPDATE records SET sig = '' WHERE seq = ?`, n)
			},
			seq: n, problem: audit.ProblemUnsigned,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLog(t, nil)
			l.appendN(t, n)
			if err := l.w.Close(); err != nil {
				t.Fatal(err)
			}
			recs := records(t, l.path)
			tt.tamper(t, l.raw(t), recs)

			rep, err := audit.Verify(context.Background(), l.path, l.pub)
			var te *audit.TamperError
			if !errors.As(err, &te) {
				t.Fatalf("Verify = %+v, %v; want a *TamperError", rep, err)
			}
			if te.Seq != tt.seq || te.Problem != tt.problem {
				t.Fatalf("Verify: %v; want seq %d, %q", err, tt.seq, tt.problem)
			}
			if rep == nil || rep.Verified >= tt.seq {
				t.Fatalf("report = %+v; want Verified below %d", rep, tt.seq)
			}
		})
	}
}

func TestVerifyRejectsAnotherPublicKey(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 3)
	other, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, err = audit.Verify(context.Background(), l.path, other)
	var te *audit.TamperError
	if !errors.As(err, &te) || te.Seq != 1 || te.Problem != audit.ProblemBadSignature {
		t.Fatalf("Verify with another key: %v; want bad signature at seq 1", err)
	}
}

func TestVerifyRunsWhileTheWriterAppends(t *testing.T) {
	l := newTestLog(t, nil)
	l.appendN(t, 5)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			if _, err := l.w.Append(context.Background(), sampleRecord(i)); err != nil {
				t.Errorf("Append: %v", err)
				return
			}
		}
	}()
	for range 5 {
		if _, err := audit.Verify(context.Background(), l.path, l.pub); err != nil {
			t.Errorf("Verify during appends: %v", err)
		}
	}
	<-done
}

func TestVerifyRefusesWhatIsNotALog(t *testing.T) {
	l := newTestLog(t, nil)
	if _, err := audit.Verify(context.Background(), l.path+".missing", l.pub); err == nil {
		t.Fatal("Verify of a missing file succeeded")
	}
	if _, err := audit.Verify(context.Background(), l.path, l.pub[:5]); err == nil {
		t.Fatal("Verify with a short key succeeded")
	}
}

// TestVerifyNamesTheBatchWhenATamperedRecordSharesOne edits a record in
// the middle of a batch of several: nothing from the batch's first record on
// is proven any more, and the detail names the edited record. A slow clock
// holds the writer on each batch so that concurrent appends queue into one.
func TestVerifyNamesTheBatchWhenATamperedRecordSharesOne(t *testing.T) {
	l := newTestLog(t, &audit.Options{Now: func() time.Time {
		time.Sleep(50 * time.Millisecond)
		return time.Now()
	}})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := l.w.Append(context.Background(), sampleRecord(i)); err != nil {
				t.Errorf("Append: %v", err)
			}
		})
	}
	wg.Wait()
	l.w.Close()

	// A batch runs from the record after a signed one to the next signed one.
	first, last, start := int64(0), int64(0), int64(1)
	for _, r := range records(t, l.path) {
		if r.Sig == "" {
			continue
		}
		if r.Seq-start >= 2 {
			first, last = start, r.Seq
			break
		}
		start = r.Seq + 1
	}
	if first == 0 {
		t.Fatal("no batch of three or more records formed")
	}
	middle := first + 1
	mustExec(t, l.raw(t), `UPDATE records SET principal = 'mallory' WHERE seq = ?`, middle)

	_, err := audit.Verify(context.Background(), l.path, l.pub)
	var te *audit.TamperError
	if !errors.As(err, &te) || te.Seq != first || te.Problem != audit.ProblemHashMismatch {
		t.Fatalf("Verify = %v; want a hash mismatch reported at seq %d (batch %d-%d)", err, first, first, last)
	}
	if !strings.Contains(te.Detail, fmt.Sprintf("seq %d ", middle)) {
		t.Fatalf("detail %q does not name seq %d", te.Detail, middle)
	}
}
