package service

import (
	"context"
	"sync"

	"github.com/babelagent/babel/run"
)

// Snapshot is a finished run as a RunStore keeps it: what callers are shown
// (already sanitized and bounded) and the events a late subscriber replays.
// A Snapshot is immutable once saved.
type Snapshot struct {
	View   *View
	Events []run.Event
}

// RunStore keeps finished runs. Runs in flight live in the Service; a run
// is saved once, when it finishes. Implementations must be safe for
// concurrent use. The in-memory store is the default; a durable store
// (SQLite) can replace it without touching the doors.
type RunStore interface {
	// Save records a finished run.
	Save(ctx context.Context, s *Snapshot) error
	// Get returns the run with id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Snapshot, error)
	// List returns up to limit runs of principal, newest first.
	List(ctx context.Context, principal string, limit int) ([]*Snapshot, error)
}

// MemoryStore is a RunStore that keeps the most recent runs in memory and
// forgets the oldest beyond its capacity.
type MemoryStore struct {
	mu    sync.Mutex
	byID  map[string]*Snapshot
	ring  []string // ids, oldest first once full
	next  int
	count int
}

// NewMemoryStore returns a store that keeps at most capacity runs (at least 1).
func NewMemoryStore(capacity int) *MemoryStore {
	if capacity < 1 {
		capacity = 1
	}
	return &MemoryStore{byID: make(map[string]*Snapshot, capacity), ring: make([]string, capacity)}
}

func (m *MemoryStore) Save(_ context.Context, s *Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := s.View.RunID
	if _, ok := m.byID[id]; ok {
		m.byID[id] = s
		return nil
	}
	if m.count == len(m.ring) {
		delete(m.byID, m.ring[m.next])
	} else {
		m.count++
	}
	m.ring[m.next] = id
	m.next = (m.next + 1) % len(m.ring)
	m.byID[id] = s
	return nil
}

func (m *MemoryStore) Get(_ context.Context, id string) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.byID[id]; ok {
		return s, nil
	}
	return nil, ErrNotFound
}

func (m *MemoryStore) List(_ context.Context, principal string, limit int) ([]*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Snapshot
	for i := 1; i <= m.count && len(out) < limit; i++ {
		id := m.ring[(m.next-i+len(m.ring))%len(m.ring)]
		if s := m.byID[id]; s != nil && s.View.Principal == principal {
			out = append(out, s)
		}
	}
	return out, nil
}

// Len returns the number of runs kept.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

var _ RunStore = (*MemoryStore)(nil)
