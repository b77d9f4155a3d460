// Package kerneltest helps tests prove that agents run only through
// kernel.Invoke, whatever door a call comes in by.
package kerneltest

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/babelagent/babel/agent"
)

// kernelFrame is the only function allowed to call Agent.Run.
const kernelFrame = "github.com/babelagent/babel/kernel.(*Kernel).execute"

// Probe is an agent that records who called its Run. Every call it sees
// must come straight from the kernel.
type Probe struct {
	mu      sync.Mutex
	calls   int
	callers []string
	Reply   func(in agent.Message) agent.Message
}

// Card describes the probe: no effects.
func (p *Probe) Card() agent.Card { return agent.Card{Name: "probe", Kind: "fn"} }

// Run records its caller and echoes (or replies).
func (p *Probe) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	pc, _, _, _ := runtime.Caller(1)
	name := runtime.FuncForPC(pc).Name()
	p.mu.Lock()
	p.calls++
	p.callers = append(p.callers, name)
	p.mu.Unlock()
	if p.Reply != nil {
		return p.Reply(in), nil
	}
	return agent.Message{Parts: in.Parts}, nil
}

// Check returns an error if the probe never ran, or ran from anywhere but
// the kernel.
func (p *Probe) Check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == 0 {
		return fmt.Errorf("probe never ran")
	}
	for _, c := range p.callers {
		if c != kernelFrame {
			return fmt.Errorf("agent ran from %s, not through kernel.Invoke", c)
		}
	}
	return nil
}

// Calls is how many times the probe ran.
func (p *Probe) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}
