package service

import (
	"context"
	"sync"
	"time"

	"github.com/babelagent/babel/run"
)

// liveRun is a run in flight. The scheduler appends its events; callers
// read and subscribe. Once done is closed, view is final.
type liveRun struct {
	id        string
	resume    bool
	graph     string
	principal Principal
	tags      map[string]string
	started   time.Time
	cancel    context.CancelCauseFunc
	done      chan struct{}
	maxEvents int

	mu      sync.Mutex
	events  []run.Event
	dropped int
	ended   bool          // run.finished was appended
	notify  chan struct{} // closed on the next append; nil when nobody waits
	corr    string        // correlation id, made on the first error
	view    *View         // final view, set before done is closed
}

// onEvent receives the scheduler's events. It must not block: it appends
// under a short lock and wakes subscribers.
func (lr *liveRun) onEvent(ev run.Event) {
	lr.mu.Lock()
	if ev.Error != "" {
		if lr.corr == "" {
			lr.corr = NewCorrelationID()
		}
		if ev.Type == run.EventNodeFailed {
			ev.Error = safeNodeError(run.NodeStatus(ev.Status))
		} else {
			ev.Error = "the run did not succeed (correlation id " + lr.corr + ")"
		}
	}
	switch {
	case ev.Type == run.EventRunFinished:
		lr.events = append(lr.events, ev)
		lr.ended = true
	case len(lr.events) < lr.maxEvents-1:
		lr.events = append(lr.events, ev)
	default:
		lr.dropped++
	}
	if lr.notify != nil {
		close(lr.notify)
		lr.notify = nil
	}
	lr.mu.Unlock()
}

// correlation returns the run's correlation id, making one if needed.
func (lr *liveRun) correlation() string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.corr == "" {
		lr.corr = NewCorrelationID()
	}
	return lr.corr
}

// since returns the events from index from on, whether the stream has
// ended, and a channel closed on the next event (when it has not).
func (lr *liveRun) since(from int) ([]run.Event, bool, <-chan struct{}) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var batch []run.Event
	if from < len(lr.events) {
		batch = append(batch, lr.events[from:]...)
	}
	if lr.ended {
		return batch, true, nil
	}
	if lr.notify == nil {
		lr.notify = make(chan struct{})
	}
	return batch, false, lr.notify
}

func (lr *liveRun) snapshotEvents() []run.Event {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]run.Event(nil), lr.events...)
}

func (lr *liveRun) finalView() *View {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.view
}
