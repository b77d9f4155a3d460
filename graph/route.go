package graph

import (
	"encoding/json"
	"strings"

	"github.com/babelagent/babel/agent"
)

// Route returns the successors selected by m, and the key that chose them.
func (b *Branch) Route(m agent.Message) ([]int, string) {
	key := strings.TrimSpace(m.Text())
	if b.check != nil && b.check.path != nil {
		key = ""
		if v, err := m.Any(); err == nil {
			if got, ok := b.check.path.Get(v); ok {
				if s, ok := got.(string); ok {
					key = s
				} else {
					raw, _ := json.Marshal(got)
					key = string(raw)
				}
			}
		}
	}
	if t, ok := b.Cases[key]; ok {
		return t, key
	}
	return b.Default, key
}
