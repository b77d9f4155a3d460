package secrets

import (
	"strings"
	"testing"
)

// cleanKB is a kilobyte of ordinary log and tool output: timestamps,
// hyphens, underscores, capitals, a URL, JSON punctuation; no credential.
var cleanKB = func() string {
	line := `2025-06-01T12:00:00Z INFO run_id=r-42 node=summary status=ok took=12ms url=https://api.example.com/v1/items?page=2 {"items":[{"id":7,"name":"Widget A","tags":["x","y"]}]} `
	s := strings.Repeat(line, 1024/len(line)+1)
	return s[:1024]
}()

func BenchmarkRedactClean(b *testing.B) {
	run := func(b *testing.B, r *Redactor) {
		b.SetBytes(int64(len(cleanKB)))
		b.ReportAllocs()
		for b.Loop() {
			if out := r.Redact(cleanKB); len(out) != len(cleanKB) {
				b.Fatal("clean input changed")
			}
		}
	}
	b.Run("none-registered", func(b *testing.B) { run(b, NewRedactor()) })
	b.Run("3-registered", func(b *testing.B) {
		r := NewRedactor()
		r.Register("sk-TEST-5f3c9e1d2b4a6c8e", "hunter2-but-longer", "ghp_0123456789abcdefghij0123456789abcd")
		run(b, r)
	})
}

func BenchmarkRedactHit(b *testing.B) {
	r := NewRedactor()
	r.Register("registered-secret-value")
	in := cleanKB[:400] + " registered-secret-value " + cleanKB[400:700] + " Authorization: Bearer abc.def.ghi " + cleanKB[700:]
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if out := r.Redact(in); strings.Contains(out, "registered-secret-value") {
			b.Fatal("not redacted")
		}
	}
}

func BenchmarkRedactJSONClean(b *testing.B) {
	doc := []byte(`{"items":[{"id":7,"name":"Widget A","tags":["x","y"]}],"next":"page-2","count":1,"ok":true}`)
	r := NewRedactor()
	r.Register("registered-secret-value")
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		_ = r.RedactJSON(doc)
	}
}
