package run

import (
	"slices"
	"sync"
	"sync/atomic"
)

// semaphore bounds the nodes running at once across a Runner's runs. Taking
// a free slot is one compare-and-swap; only a full semaphore takes its lock
// and parks the caller, first come first served among those parked.
type semaphore struct {
	max   int64
	taken atomic.Int64
	nwait atomic.Int64 // how many are parked, or about to be

	mu   sync.Mutex
	wait []chan struct{} // parked callers, oldest first
}

func newSemaphore(max int) *semaphore { return &semaphore{max: int64(max)} }

func (s *semaphore) tryAcquire() bool {
	for {
		n := s.taken.Load()
		if n >= s.max {
			return false
		}
		if s.taken.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// acquire takes a slot, or gives up when ctx is done; it reports whether
// it took one.
func (s *semaphore) acquire(ctx interface{ Done() <-chan struct{} }) bool {
	if s.tryAcquire() {
		return true
	}
	s.mu.Lock()
	s.nwait.Add(1) // before the second try: a release after it sees us
	if s.tryAcquire() {
		s.nwait.Add(-1)
		s.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	s.wait = append(s.wait, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return true // a release handed its slot over
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.wait, ch); i >= 0 {
			s.wait = slices.Delete(s.wait, i, i+1)
			s.nwait.Add(-1)
			s.mu.Unlock()
			return false
		}
		s.mu.Unlock()
		s.release() // handed over as we gave up: pass it on
		return false
	}
}

// release gives a slot back, handing it to the oldest parked caller if
// there is one.
func (s *semaphore) release() {
	s.taken.Add(-1) // before looking for waiters: a waiter's second try sees it
	if s.nwait.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.wait) == 0 || !s.tryAcquire() {
		return // the waiter took it on its second try, or another caller did
	}
	ch := s.wait[0]
	s.wait = slices.Delete(s.wait, 0, 1)
	s.nwait.Add(-1)
	close(ch)
}
