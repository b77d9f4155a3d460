package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Label is a provenance label carried by a Message.
type Label uint32

const (
	// Untrusted marks data that came from anyone but the run's principal:
	// a peer, a web page, a model reading such data.
	Untrusted Label = 1 << iota
	// Sensitive marks private data: the output of a node declared sensitive.
	Sensitive
)

var labelNames = [...]struct {
	l    Label
	name string
}{{Sensitive, "sensitive"}, {Untrusted, "untrusted"}}

// Labels is a set of labels. The zero value is the empty set.
type Labels uint32

// With returns the set with l added.
func (s Labels) With(l Label) Labels { return s | Labels(l) }

// Has reports whether l is in the set.
func (s Labels) Has(l Label) bool { return s&Labels(l) != 0 }

// Union returns the labels of both sets: what derived data carries.
func (s Labels) Union(o Labels) Labels { return s | o }

// Names lists the labels in a stable order.
func (s Labels) Names() []string {
	out := make([]string, 0, 2)
	for _, n := range labelNames {
		if s.Has(n.l) {
			out = append(out, n.name)
		}
	}
	return out
}

func (s Labels) String() string { return strings.Join(s.Names(), ",") }

// ParseLabel returns the Label named name.
func ParseLabel(name string) (Label, error) {
	for _, n := range labelNames {
		if n.name == name {
			return n.l, nil
		}
	}
	return 0, fmt.Errorf("unknown label %q (want untrusted or sensitive)", name)
}

func (s Labels) MarshalJSON() ([]byte, error) { return json.Marshal(s.Names()) }

func (s *Labels) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	var out Labels
	for _, n := range names {
		l, err := ParseLabel(n)
		if err != nil {
			return err
		}
		out = out.With(l)
	}
	*s = out
	return nil
}
