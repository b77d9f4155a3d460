// Package run is the scheduler: it executes compiled graphs, starting each
// node as soon as its barrier is met, under a global concurrency bound, a
// per-node timeout and a run deadline that always hold.
//
// The scheduler never calls an agent itself: every node execution goes
// through kernel.Invoke.
//
// How a run moves: Runner.Run hands the run to a worker from a pool of
// parked goroutines and waits, so that it returns at the deadline even when
// a node ignores its context. A worker runs a node, applies its completion
// under the run's lock, and goes straight on with one node that became
// ready (a chain runs on one goroutine); other ready nodes wait in the
// run's queue, and whoever takes a node with more behind it calls one more
// worker, so a node that blocks holds up nothing. One timer per Runner (the
// keeper) enforces every run's deadline and every attempt's timeout. An
// attempt's context is a small struct until an agent waits on it.
package run

import (
	"encoding/json"
	"time"

	"github.com/babelagent/babel/agent"
)

// Status is a run's state.
type Status string

const (
	StatusRunning          Status = "running"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusCancelled        Status = "cancelled"
	StatusDenied           Status = "denied"
	StatusLimitExceeded    Status = "limit_exceeded"
)

// Terminal reports whether no more work will happen for the run.
func (s Status) Terminal() bool { return s != StatusRunning && s != StatusAwaitingApproval }

// NodeStatus is a node's state in a run.
type NodeStatus string

const (
	NodePending   NodeStatus = "pending"
	NodeRunning   NodeStatus = "running"
	NodeSucceeded NodeStatus = "succeeded"
	NodeFailed    NodeStatus = "failed"
	NodeSkipped   NodeStatus = "skipped"
	NodeCancelled NodeStatus = "cancelled"
	NodeWaiting   NodeStatus = "awaiting_approval"
	NodeDenied    NodeStatus = "denied"
)

// NodeTrace is one node's part in a run.
type NodeTrace struct {
	Node       string     `json:"node"`
	Status     NodeStatus `json:"status"`
	DurationMS float64    `json:"duration_ms"`
	Attempts   int        `json:"attempts"`
	Iterations int        `json:"iterations,omitempty"`
	Error      string     `json:"error,omitempty"`
	Warnings   []string   `json:"warnings,omitempty"`
	Route      string     `json:"route,omitempty"`
	Labels     []string   `json:"labels,omitempty"`
}

// Result is a finished (or paused) run. Its JSON form is the run shape that
// `babel run --json` prints and the REST API returns.
type Result struct {
	RunID      string
	Graph      string
	Principal  string
	Status     Status
	Output     agent.Message
	Error      string
	Trace      []NodeTrace
	Labels     agent.Labels
	Steps      int64
	StartedAt  time.Time
	FinishedAt time.Time
	// Approvals lists the approvals the run waits for (awaiting_approval).
	Approvals []string
	// Checkpoint, for a run awaiting approval, holds the output of every node
	// that succeeded, so the run can resume without running them again
	// (Request.Resume).
	Checkpoint map[string]agent.Message
}

type resultJSON struct {
	RunID      string          `json:"run_id"`
	Graph      string          `json:"graph"`
	Principal  string          `json:"principal"`
	Status     Status          `json:"status"`
	Output     json.RawMessage `json:"output"`
	Error      string          `json:"error,omitempty"`
	Trace      []NodeTrace     `json:"trace"`
	Labels     agent.Labels    `json:"labels"`
	Steps      int64           `json:"steps"`
	Approvals  []string        `json:"approvals,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
}

// MarshalJSON renders the run shape: output as a JSON value (a string for
// text output).
func (r *Result) MarshalJSON() ([]byte, error) {
	out, err := r.Output.Value()
	if err != nil {
		out = json.RawMessage("null")
	}
	trace := r.Trace
	if trace == nil {
		trace = []NodeTrace{}
	}
	return json.Marshal(resultJSON{
		RunID: r.RunID, Graph: r.Graph, Principal: r.Principal, Status: r.Status, Output: out,
		Error: r.Error, Trace: trace, Labels: r.Labels, Steps: r.Steps, Approvals: r.Approvals,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
	})
}

// UnmarshalJSON reads the run shape back.
func (r *Result) UnmarshalJSON(b []byte) error {
	var v resultJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Result{
		RunID: v.RunID, Graph: v.Graph, Principal: v.Principal, Status: v.Status, Error: v.Error,
		Trace: v.Trace, Labels: v.Labels, Steps: v.Steps, Approvals: v.Approvals, StartedAt: v.StartedAt, FinishedAt: v.FinishedAt,
	}
	if len(v.Output) > 0 && string(v.Output) != "null" {
		r.Output = agent.FromJSON(v.Output)
		r.Output.Labels = v.Labels
	}
	return nil
}

// Event types on a run's stream.
const (
	EventRunStarted        = "run.started"
	EventNodeStarted       = "node.started"
	EventNodeFinished      = "node.finished"
	EventNodeFailed        = "node.failed"
	EventNodeSkipped       = "node.skipped"
	EventApprovalRequested = "approval.requested"
	EventApprovalDecided   = "approval.decided"
	EventRunFinished       = "run.finished"
)

// Event is one step of a run, as the CLI, the servers and the dashboard see it.
type Event struct {
	Type       string    `json:"type"`
	RunID      string    `json:"run_id"`
	Graph      string    `json:"graph,omitempty"`
	Node       string    `json:"node,omitempty"`
	Time       time.Time `json:"time"`
	Attempt    int       `json:"attempt,omitempty"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	Status     string    `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
}
