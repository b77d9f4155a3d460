package graph

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/internal/jsonpath"
)

// Condition is a check on a node's output, used by gates and loops. Every
// field that is set must hold.
type Condition struct {
	// Path selects a value of a JSON output ("$.score"); empty means the whole output.
	Path        string `json:"path,omitempty"`
	Equals      any    `json:"equals,omitempty"`
	Contains    string `json:"contains,omitempty"`
	NotContains string `json:"not_contains,omitempty"`
	Matches     string `json:"matches,omitempty"`
	MinLength   *int   `json:"min_length,omitempty"`
	MaxLength   *int   `json:"max_length,omitempty"`
	Exists      *bool  `json:"exists,omitempty"`
}

// Check is a compiled Condition.
type Check struct {
	c    Condition
	path *jsonpath.Path
	re   *regexp.Regexp
}

func compileCondition(c Condition) (*Check, error) {
	ch := &Check{c: c}
	if c.Path != "" {
		p, err := jsonpath.Compile(c.Path)
		if err != nil {
			return nil, err
		}
		ch.path = p
	}
	if c.Matches != "" {
		re, err := regexp.Compile(c.Matches)
		if err != nil {
			return nil, fmt.Errorf("matches: %w", err)
		}
		ch.re = re
	}
	if c == (Condition{}) || (c.Path != "" && c.Equals == nil && c.Contains == "" && c.NotContains == "" && c.Matches == "" && c.MinLength == nil && c.MaxLength == nil && c.Exists == nil) {
		return nil, fmt.Errorf("condition checks nothing: set equals, contains, not_contains, matches, min_length, max_length or exists")
	}
	return ch, nil
}

// Eval reports whether m satisfies the check, and if not, why.
func (ch *Check) Eval(m agent.Message) (bool, string) {
	var val any
	var text string
	if ch.path != nil {
		v, err := m.Any()
		if err != nil {
			return false, "output is not JSON"
		}
		got, ok := ch.path.Get(v)
		if ch.c.Exists != nil && ok != *ch.c.Exists {
			return false, fmt.Sprintf("%s exists=%v", ch.c.Path, ok)
		}
		if !ok {
			if ch.c.Exists != nil {
				return true, ""
			}
			return false, fmt.Sprintf("%s not found", ch.c.Path)
		}
		val = got
		if s, ok := got.(string); ok {
			text = s
		} else {
			b, _ := json.Marshal(got)
			text = string(b)
		}
	} else {
		text = m.Text()
		val = text
		if v, err := m.Any(); err == nil {
			val = v
		}
	}
	c := ch.c
	if c.Equals != nil && !looseEqual(val, c.Equals) {
		return false, fmt.Sprintf("value is not %v", c.Equals)
	}
	if c.Contains != "" && !strings.Contains(text, c.Contains) {
		return false, fmt.Sprintf("does not contain %q", c.Contains)
	}
	if c.NotContains != "" && strings.Contains(text, c.NotContains) {
		return false, fmt.Sprintf("contains %q", c.NotContains)
	}
	if ch.re != nil && !ch.re.MatchString(text) {
		return false, fmt.Sprintf("does not match %q", c.Matches)
	}
	if c.MinLength != nil && len([]rune(text)) < *c.MinLength {
		return false, fmt.Sprintf("shorter than %d", *c.MinLength)
	}
	if c.MaxLength != nil && len([]rune(text)) > *c.MaxLength {
		return false, fmt.Sprintf("longer than %d", *c.MaxLength)
	}
	return true, ""
}

// looseEqual compares JSON values, treating numbers of any Go type alike.
func looseEqual(a, b any) bool {
	na, aok := toFloat(a)
	nb, bok := toFloat(b)
	if aok && bok {
		return na == nb
	}
	if reflect.DeepEqual(a, b) {
		return true
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
