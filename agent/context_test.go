package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// countingSource may be asked more than once when goroutines race to look
// first; all but one answer are dropped.
type countingSource struct {
	n  atomic.Int32
	cc CallContext
}

func (s *countingSource) CallContext() CallContext {
	s.n.Add(1)
	return s.cc
}

// However many goroutines of a call look at once, every look sees the same
// CallContext: the one its source made.
func TestCallScopeGivesOneCallContext(t *testing.T) {
	src := &countingSource{cc: CallContext{Info: CallInfo{RunID: "r1", Node: "n", Attempt: 2}}}
	var s CallScope
	ctx := s.BindFrom(context.Background(), src)
	var wg sync.WaitGroup
	seen := make([]*CallInfo, 8)
	for i := range seen {
		wg.Go(func() { seen[i] = CallInfoFrom(ctx) })
	}
	wg.Wait()
	if src.n.Load() == 0 {
		t.Fatal("source never asked")
	}
	for _, ci := range seen {
		if ci != seen[0] || ci.RunID != "r1" || ci.Node != "n" || ci.Attempt != 2 {
			t.Fatalf("call info %+v at %p, want run r1 node n attempt 2 at %p", ci, ci, seen[0])
		}
	}
	// A scope derived from it starts from a copy: changing it leaves the
	// call's own untouched.
	inner := WithSecrets(ctx, NewSecrets())
	if CallInfoFrom(inner) == CallInfoFrom(ctx) || CallInfoFrom(inner).RunID != "r1" {
		t.Fatal("a derived scope shares or loses the call's info")
	}
}

// An agent that never looks costs its source nothing.
func TestCallScopeNotAskedUntilLooked(t *testing.T) {
	src := &countingSource{}
	var s CallScope
	ctx := s.BindFrom(context.Background(), src)
	_ = ctx.Value("other key")
	if src.n.Load() != 0 {
		t.Fatal("source asked before anyone looked at the call context")
	}
}
