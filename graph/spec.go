package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/goccy/go-yaml"
)

// Spec is a topology as written in a YAML or JSON file. Field names are the
// file's keys; unknown keys are a load error.
type Spec struct {
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	InputSchema any        `json:"input_schema,omitempty"`
	Nodes       []NodeSpec `json:"nodes"`
	// Tools are agents that planning nodes (LLMs) may call; they are not
	// part of the dataflow and run only when a node calls them.
	Tools  []NodeSpec `json:"tools,omitempty"`
	Limits LimitsSpec `json:"limits,omitempty"`
}

// NodeSpec is one node of a topology.
type NodeSpec struct {
	Name string `json:"name"`
	// Agent is a short form ("builtin:trim", "openai:gpt-4o-mini",
	// "mcp+stdio:...", "https://...") or a one-key map {kind: config}.
	Agent any `json:"agent"`
	// With is extra configuration handed to the agent's factory.
	With map[string]any `json:"with,omitempty"`
	// After lists upstream nodes. Absent: the previous node in the file.
	// An empty list makes the node a root.
	After   *[]string `json:"after,omitempty"`
	Barrier string    `json:"barrier,omitempty"` // all (default) | any | k_of_n | optional
	K       int       `json:"k,omitempty"`

	Effects      []string `json:"effects,omitempty"`
	Egress       []string `json:"egress,omitempty"`
	AllowPrivate []string `json:"allow_private,omitempty"`
	Secrets      []string `json:"secrets,omitempty"`
	Approval     string   `json:"approval,omitempty"` // required | on-untrusted (default) | never
	Sensitive    bool     `json:"sensitive,omitempty"`
	Trusted      bool     `json:"trusted,omitempty"`

	Timeout     Duration   `json:"timeout,omitempty"`
	Retry       *RetrySpec `json:"retry,omitempty"`
	Concurrency int        `json:"concurrency,omitempty"`

	// ToolNames lists the tools (from the graph's tools:) this node may call.
	ToolNames []string `json:"tools,omitempty"`

	Branch *BranchSpec `json:"branch,omitempty"`
	Loop   *LoopSpec   `json:"loop,omitempty"`
	Gate   *GateSpec   `json:"gate,omitempty"`
}

// RetrySpec retries a failed node with exponential backoff.
type RetrySpec struct {
	Max     int      `json:"max"`
	Backoff Duration `json:"backoff,omitempty"`
}

// BranchSpec routes a node's output to some of its successors.
type BranchSpec struct {
	// On selects the value to route by ("$.kind"); empty means the output text.
	On      string              `json:"on,omitempty"`
	Cases   map[string][]string `json:"cases"`
	Default []string            `json:"default,omitempty"`
}

// LoopSpec is a bounded back-edge: after this node, go back to To until
// Until holds or Max iterations have run.
type LoopSpec struct {
	To    string     `json:"to"`
	Max   int        `json:"max"`
	Until *Condition `json:"until,omitempty"`
}

// GateSpec checks a node's output.
type GateSpec struct {
	Check   Condition `json:"check"`
	OnFail  string    `json:"on_fail,omitempty"` // fail (default) | warn | retry
	Retries int       `json:"retries,omitempty"`
}

// LimitsSpec lowers the run's limits for this graph (never raises them above
// the operator's ceilings).
type LimitsSpec struct {
	Deadline  Duration `json:"deadline,omitempty"`
	MaxSteps  int      `json:"max_steps,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"`
}

// Duration is a time.Duration written as "30s", "1m30s" or a number of seconds.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return d.UnmarshalText([]byte(s))
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want \"30s\" or seconds, got %s", b)
	}
	if secs < 0 || secs > 1e6 {
		return fmt.Errorf("duration %v s out of range", secs)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a Go duration such as 30s or 1m30s", b)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", b)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MaxFileSize bounds a topology file.
const MaxFileSize = 4 << 20

// Parse decodes a topology from YAML or JSON (JSON is YAML). Unknown keys,
// duplicate keys and malformed values are errors that name the line.
func Parse(data []byte) (*Spec, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("topology is %d bytes; the limit is %d", len(data), MaxFileSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("topology is empty")
	}
	var s Spec
	if err := yaml.UnmarshalWithOptions(data, &s, yaml.Strict(), yaml.DisallowUnknownField(), yaml.UseJSONUnmarshaler()); err != nil {
		return nil, fmt.Errorf("topology: %s", yaml.FormatError(err, false, true))
	}
	return &s, nil
}

// LoadFile reads and parses the topology at path. Only an explicit path is
// ever read.
func LoadFile(path string) (*Spec, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read topology %s: not a regular file", path)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("topology %s is %d bytes; the limit is %d", path, fi.Size(), MaxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
