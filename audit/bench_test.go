package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelagent/babel/audit"
)

// BenchmarkAppendParallel measures durable appends through group commit:
// every op is one Append that returned after its batch's fsync. Throughput
// grows with the number of callers waiting at once, because they share a
// commit; callers=128 is a busy kernel.
func BenchmarkAppendParallel(b *testing.B) {
	for _, callers := range []int{16, 128, 512} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			l := newTestLog(b, nil)
			b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
			b.ReportAllocs()
			var i atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.w.Append(context.Background(), sampleRecord(int(i.Add(1)))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkVerify1M times Verify over a log of one million records. Building
// the log takes a while, so it runs only when BABEL_BENCH_1M=1.
func BenchmarkVerify1M(b *testing.B) {
	if os.Getenv("BABEL_BENCH_1M") != "1" {
		b.Skip("set BABEL_BENCH_1M=1 to build a 1M-record log and time Verify")
	}
	const total = 1_000_000
	l := newTestLog(b, nil)
	start := time.Now()
	fill(b, l.w, total)
	b.Logf("built %d records in %v", total, time.Since(start))
	b.ReportAllocs()
	for b.Loop() {
		rep, err := audit.Verify(context.Background(), l.path, l.pub)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Records != total {
			b.Fatalf("verified %d records", rep.Records)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// fill appends n records from many goroutines, so they commit in big batches.
func fill(b testing.TB, w *audit.Writer, n int) {
	const workers = 2048
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if _, err := w.Append(context.Background(), sampleRecord(int(i))); err != nil {
					if b != nil {
						b.Error(err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkCanonical(b *testing.B) {
	in := json.RawMessage(`{"url":"https://tickets.example.com/api/reply","method":"POST","body":{"ticket":12345,` +
		`"text":"Hello, thanks for reaching out. We are looking into it.","labels":["billing","urgent"]},` +
		`"headers":{"Content-Type":"application/json"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := audit.Canonical(in); err != nil {
			b.Fatal(err)
		}
	}
}
