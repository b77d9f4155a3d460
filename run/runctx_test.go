package run

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// A run's context behaves as context.WithCancelCause of the caller's would,
// whether the context behind it was made before it was stopped, after, or
// never.
func TestRunContextActsAsACancelCauseContext(t *testing.T) {
	for _, when := range []string{"before", "after", "never"} {
		t.Run(when, func(t *testing.T) {
			caller := context.WithValue(context.Background(), ctxKey{}, "v")
			c := &runCtx{parent: caller, deadline: mono() + int64(time.Hour)}
			var child context.Context
			derive := func() {
				var cancel context.CancelFunc
				child, cancel = context.WithCancel(c)
				t.Cleanup(cancel)
			}
			if when == "before" {
				derive()
			}
			if c.Err() != nil || c.cause() != nil {
				t.Fatalf("a fresh run context reports %v (cause %v)", c.Err(), c.cause())
			}
			c.stop(errKilled)
			c.stop(errFailed) // the first cause stays
			if when == "after" {
				derive()
			}
			if !errors.Is(c.Err(), context.Canceled) || c.cause() != errKilled {
				t.Fatalf("stopped: Err %v cause %v, want Canceled and the kill", c.Err(), c.cause())
			}
			if child != nil {
				select {
				case <-child.Done():
				case <-time.After(time.Second):
					t.Fatal("a context derived from the run's is not done once the run is stopped")
				}
				if context.Cause(child) != errKilled {
					t.Fatalf("derived context's cause %v, want the kill", context.Cause(child))
				}
			}
			if c.Value(ctxKey{}) != "v" {
				t.Fatal("the caller's values do not show through")
			}
		})
	}
}

// The caller's cancellation shows at once, with the caller's cause; the
// run's deadline reads as DeadlineExceeded.
func TestRunContextFollowsTheCaller(t *testing.T) {
	caller, cancel := context.WithCancelCause(context.Background())
	c := &runCtx{parent: caller, deadline: mono() + int64(time.Hour)}
	why := errors.New("client went away")
	cancel(why)
	if !errors.Is(c.Err(), context.Canceled) || c.cause() != why {
		t.Fatalf("after the caller's cancel: Err %v cause %v", c.Err(), c.cause())
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed after the caller's cancel")
	}

	d := &runCtx{parent: context.Background(), deadline: mono()}
	d.stop(errDeadline)
	if !errors.Is(d.Err(), context.DeadlineExceeded) || d.cause() != errDeadline {
		t.Fatalf("at the deadline: Err %v cause %v", d.Err(), d.cause())
	}
	d.release()
	if d.cause() != errDeadline {
		t.Fatal("release changed the cause")
	}
}
