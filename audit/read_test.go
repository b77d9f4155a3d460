package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/babelagent/babel/audit"
)

func TestExportRoundTripsEveryRecord(t *testing.T) {
	l := newTestLog(t, nil)
	var want []audit.Record
	for i := range 5 {
		r := sampleRecord(i)
		r.Error = "tool said <no> & \"why\""
		if _, err := l.w.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		want = append(want, *r)
	}
	want = append(want, audit.Record{}) // one without args
	want[5] = audit.Record{Kind: audit.KindRunFinished, RunID: "run-0", Status: "succeeded"}
	if _, err := l.w.Append(context.Background(), &want[5]); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	if err := audit.Export(context.Background(), l.path, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines; want %d", len(lines), len(want))
	}
	for i, line := range lines {
		var got audit.Record
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("line %d:\n got %+v\nwant %+v", i+1, got, want[i])
		}
		if got.ComputeHash() != got.Hash {
			t.Fatalf("line %d: exported record does not hash to its hash", i+1)
		}
	}
	if !strings.Contains(lines[0], `"run_id":"run-0"`) || !strings.Contains(lines[0], `"args":{"a":"x","b":[1,2],"n":0}`) {
		t.Fatalf("line 1 = %s", lines[0])
	}
}

func TestReplayReturnsARunsTrajectoryInOrder(t *testing.T) {
	l := newTestLog(t, nil)
	steps := []audit.Record{
		{Kind: audit.KindRunStarted, RunID: "A", RootRunID: "A"},
		{Kind: audit.KindRunStarted, RunID: "C", RootRunID: "C"},
		{Kind: audit.KindNodeIntent, RunID: "A", RootRunID: "A", Node: "plan"},
		{Kind: audit.KindRunStarted, RunID: "B", RootRunID: "A", ParentRunID: "A"},
		{Kind: audit.KindNodeIntent, RunID: "B", RootRunID: "A", ParentRunID: "A", Node: "search"},
		{Kind: audit.KindNodeIntent, RunID: "C", RootRunID: "C", Node: "other"},
		{Kind: audit.KindApprovalDecided, RunID: "A", RootRunID: "A", Approver: "bob", Decision: "approve"},
		{Kind: audit.KindRunFinished, RunID: "A", RootRunID: "A", Status: "succeeded"},
	}
	for i := range steps {
		if _, err := l.w.Append(context.Background(), &steps[i]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := audit.Replay(context.Background(), l.path, "A")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range got {
		seqs = append(seqs, r.Seq)
	}
	if want := []int64{1, 3, 4, 5, 7, 8}; !reflect.DeepEqual(seqs, want) {
		t.Fatalf("Replay(A) seqs = %v; want %v", seqs, want)
	}
	got, err = audit.Replay(context.Background(), l.path, "B")
	if err != nil || len(got) != 2 || got[1].Node != "search" {
		t.Fatalf("Replay(B) = %+v, %v", got, err)
	}
	if got, err := audit.Replay(context.Background(), l.path, "nope"); err != nil || len(got) != 0 {
		t.Fatalf("Replay(nope) = %+v, %v", got, err)
	}
}
