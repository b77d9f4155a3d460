// Package jsonpath evaluates the small subset of JSONPath that topologies
// use to pick a value out of a node's output: $, .name, ['name'] and [index].
// It never evaluates expressions or scripts.
package jsonpath

import (
	"fmt"
	"strconv"
	"strings"
)

// Path is a compiled path.
type Path struct {
	src   string
	steps []step
}

type step struct {
	key   string
	index int
	isIdx bool
}

// Compile parses p, which must start with "$".
func Compile(p string) (*Path, error) {
	s := strings.TrimSpace(p)
	if !strings.HasPrefix(s, "$") {
		return nil, fmt.Errorf("jsonpath %q: must start with $", p)
	}
	s = s[1:]
	out := &Path{src: p}
	for len(s) > 0 {
		switch s[0] {
		case '.':
			s = s[1:]
			n := strings.IndexAny(s, ".[")
			if n < 0 {
				n = len(s)
			}
			if n == 0 {
				return nil, fmt.Errorf("jsonpath %q: empty name", p)
			}
			out.steps = append(out.steps, step{key: s[:n]})
			s = s[n:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("jsonpath %q: unclosed [", p)
			}
			inner := strings.TrimSpace(s[1:end])
			s = s[end+1:]
			if len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0] {
				out.steps = append(out.steps, step{key: inner[1 : len(inner)-1]})
				continue
			}
			i, err := strconv.Atoi(inner)
			if err != nil || i < 0 {
				return nil, fmt.Errorf("jsonpath %q: index %q is not a non-negative integer", p, inner)
			}
			out.steps = append(out.steps, step{index: i, isIdx: true})
		default:
			return nil, fmt.Errorf("jsonpath %q: unexpected %q", p, s[0])
		}
	}
	return out, nil
}

func (p *Path) String() string { return p.src }

// Get returns the value at the path in v (a decoded JSON value), and
// whether it exists.
func (p *Path) Get(v any) (any, bool) {
	for _, st := range p.steps {
		if st.isIdx {
			arr, ok := v.([]any)
			if !ok || st.index >= len(arr) {
				return nil, false
			}
			v = arr[st.index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[st.key]; !ok {
			return nil, false
		}
	}
	return v, true
}
