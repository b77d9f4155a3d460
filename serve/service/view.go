package service

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/run"
)

// View is a run as callers see it: sanitized (no internal error text) and
// bounded (output size and depth). JSON holds the run shape, rendered once.
type View struct {
	RunID     string
	Graph     string
	Principal string
	Status    run.Status
	// Output is the run's output as one JSON value ("null" when there is none).
	Output json.RawMessage
	// Code and Message say what went wrong, safely; empty on success.
	Code    Code
	Message string
	// CorrelationID ties Code to the full error in the server log.
	CorrelationID string
	// Tags are what the door that started the run attached (A2A context id).
	Tags       map[string]string
	StartedAt  time.Time
	FinishedAt time.Time
	// JSON is the run shape: {run_id, graph, principal, status, output,
	// trace, labels, ...}.
	JSON json.RawMessage
}

// OutputText returns the output as text: a JSON string decoded, any other
// value as compact JSON, nothing when there is no output.
func (v *View) OutputText() string {
	if len(v.Output) == 0 || string(v.Output) == "null" {
		return ""
	}
	if v.Output[0] == '"' {
		var s string
		if json.Unmarshal(v.Output, &s) == nil {
			return s
		}
	}
	return string(v.Output)
}

type viewJSON struct {
	RunID         string          `json:"run_id"`
	Graph         string          `json:"graph"`
	Principal     string          `json:"principal"`
	Status        run.Status      `json:"status"`
	Output        json.RawMessage `json:"output"`
	Error         string          `json:"error,omitempty"`
	ErrorCode     Code            `json:"error_code,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Trace         []run.NodeTrace `json:"trace"`
	Labels        agent.Labels    `json:"labels"`
	Steps         int64           `json:"steps"`
	StartedAt     time.Time       `json:"started_at"`
	FinishedAt    time.Time       `json:"finished_at,omitzero"`
}

var nullJSON = json.RawMessage("null")

// safeNodeError is what a caller is told about a node's error.
func safeNodeError(st run.NodeStatus) string {
	switch st {
	case run.NodeDenied:
		return "denied by policy"
	case run.NodeWaiting:
		return "awaiting approval"
	case run.NodeCancelled:
		return "cancelled"
	}
	return "node failed"
}

// safeRunError maps a finished run's status to its code and safe message.
func safeRunError(res *run.Result) (Code, string) {
	node := ""
	for _, t := range res.Trace {
		if t.Error != "" && t.Status != run.NodeCancelled {
			node = t.Node
			break
		}
	}
	switch res.Status {
	case run.StatusSucceeded, run.StatusRunning:
		return "", ""
	case run.StatusLimitExceeded:
		return CodeLimitExceeded, "the run exceeded a limit (its deadline, steps or tokens)"
	case run.StatusDenied:
		if node != "" {
			return CodeDenied, fmt.Sprintf("node %s was denied by policy", node)
		}
		return CodeDenied, "a call was denied by policy"
	case run.StatusCancelled:
		return CodeCancelled, "the run was cancelled"
	case run.StatusAwaitingApproval:
		return CodeAwaitingApproval, "the run waits for a human approval"
	}
	if node != "" {
		return CodeNodeFailed, fmt.Sprintf("node %s failed", node)
	}
	return CodeNodeFailed, "the run failed"
}

// boundOutput returns raw, or a truncation marker when raw is over the
// byte cap or nests deeper than the depth cap.
func boundOutput(raw json.RawMessage, maxBytes, maxDepth int) (json.RawMessage, Code, string) {
	if len(raw) == 0 {
		return nullJSON, "", ""
	}
	if len(raw) > maxBytes {
		msg := fmt.Sprintf("the output is %d bytes; a response carries at most %d", len(raw), maxBytes)
		return marker(CodeOutputTooLarge, msg), CodeOutputTooLarge, msg
	}
	if tooDeep(raw, maxDepth) {
		msg := fmt.Sprintf("the output nests deeper than %d levels", maxDepth)
		return marker(CodeOutputTooDeep, msg), CodeOutputTooDeep, msg
	}
	return raw, "", ""
}

func marker(code Code, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"truncated": true, "code": code, "message": msg})
	return b
}

// tooDeep reports whether the JSON in b nests arrays and objects deeper
// than limit. It is a linear scan, whatever b holds.
func tooDeep(b []byte, limit int) bool {
	depth, inStr, esc := 0, false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
			if depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// runningView renders a run in flight, with a trace built from its events.
func runningView(lr *liveRun, events []run.Event) *View {
	v := &View{RunID: lr.id, Graph: lr.graph, Principal: lr.principal.ID, Status: run.StatusRunning,
		Output: nullJSON, Tags: lr.tags, StartedAt: lr.started}
	var trace []run.NodeTrace
	idx := map[string]int{}
	for _, ev := range events {
		if ev.Node == "" {
			continue
		}
		i, ok := idx[ev.Node]
		if !ok {
			i = len(trace)
			idx[ev.Node] = i
			trace = append(trace, run.NodeTrace{Node: ev.Node})
		}
		t := &trace[i]
		switch ev.Type {
		case run.EventNodeStarted:
			t.Status = run.NodeRunning
		case run.EventNodeFinished:
			t.Status, t.DurationMS, t.Attempts = run.NodeSucceeded, ev.DurationMS, ev.Attempt
		case run.EventNodeFailed:
			t.Status, t.DurationMS, t.Attempts, t.Error = run.NodeStatus(ev.Status), ev.DurationMS, ev.Attempt, ev.Error
		case run.EventNodeSkipped:
			t.Status = run.NodeSkipped
		}
	}
	if trace == nil {
		trace = []run.NodeTrace{}
	}
	v.JSON, _ = marshalView(&viewJSON{RunID: v.RunID, Graph: v.Graph, Principal: v.Principal, Status: v.Status,
		Output: nullJSON, Trace: trace, StartedAt: v.StartedAt})
	return v
}

func marshalView(vj *viewJSON) ([]byte, error) {
	return appendView(make([]byte, 0, 320+160*len(vj.Trace)+len(vj.Output)+len(vj.Error)), vj)
}
