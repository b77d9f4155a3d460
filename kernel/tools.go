package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/babelagent/babel/agent"
)

// toolset is what a planning node may call: its declared tools, each call
// made through Invoke like any node call.
type toolset struct {
	k    *Kernel
	call *Call
	// labels are those of everything the planner has seen so far: its
	// input and every tool result fed back to it.
	labels atomic.Uint32
}

func (t *toolset) List() []agent.Tool {
	out := make([]agent.Tool, 0, len(t.call.Node.Tools))
	for _, n := range t.call.Node.Tools {
		out = append(out, agent.Tool{Name: n.Name, Description: n.Card.Description, InputSchema: n.Card.InputSchema})
	}
	return out
}

func (t *toolset) Call(ctx context.Context, name string, args json.RawMessage) (agent.Message, error) {
	for _, n := range t.call.Node.Tools {
		if n.Name != name {
			continue
		}
		if !json.Valid(args) {
			return agent.Message{}, &agent.InputError{Agent: name, Reason: "tool arguments are not valid JSON"}
		}
		in := agent.FromJSON(args)
		// What the planner chose derives from all it has seen.
		in.Labels = agent.Labels(t.labels.Load())
		if t.call.Node.Card.ReadsOutside && !t.call.Node.Trusted {
			in.Labels = in.Labels.With(agent.Untrusted)
		}
		out, err := t.k.Invoke(ctx, &Call{Run: t.call.Run, Node: n, Input: in, Attempt: 1, Parent: t.call})
		if err != nil {
			return agent.Message{}, err
		}
		for {
			old := t.labels.Load()
			if t.labels.CompareAndSwap(old, old|uint32(out.Labels)) {
				break
			}
		}
		return out, nil
	}
	return agent.Message{}, &DeniedError{Node: t.call.Node.Name, Reason: fmt.Sprintf("tool %q: %v", name, agent.ErrUnknownTool)}
}
