package run

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The semaphore never lets more than its bound in, loses no wakeup when
// callers park and give up under contention, and ends with every slot free.
func TestSemaphoreBoundsAndWakes(t *testing.T) {
	const bound, workers, rounds = 3, 16, 400
	s := newSemaphore(bound)
	var in, peak atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				if (w+r)%5 == 0 { // some give up while parked
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r%3)*time.Microsecond)
				}
				if s.acquire(ctx) {
					n := in.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					if n > bound {
						t.Errorf("%d callers hold a semaphore of %d", n, bound)
					}
					in.Add(-1)
					s.release()
				}
				cancel()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("callers still parked: a wakeup was lost")
	}
	if got := s.taken.Load(); got != 0 {
		t.Fatalf("%d slots still taken after every caller released", got)
	}
	if len(s.wait) != 0 || s.nwait.Load() != 0 {
		t.Fatalf("%d callers still listed as parked (count %d)", len(s.wait), s.nwait.Load())
	}
	if peak.Load() != bound {
		t.Logf("peak %d of %d", peak.Load(), bound)
	}
}

// A caller parked on a full semaphore gives up when its context ends.
func TestSemaphoreGivesUpWhenDone(t *testing.T) {
	s := newSemaphore(1)
	if !s.acquire(context.Background()) {
		t.Fatal("a free semaphore refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if s.acquire(ctx) {
		t.Fatal("a full semaphore let a second caller in")
	}
	s.release()
	if !s.acquire(context.Background()) {
		t.Fatal("the released slot was lost")
	}
}
