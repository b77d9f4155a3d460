package mcp

import (
	"fmt"
	"strings"

	"github.com/babelagent/babel/agent"
)

// PinError says a server's tool definitions do not match the pin its node
// was configured with (or that there is no pin). The call was not made. It
// is never retryable: a person must review the tools and pin them again.
type PinError struct {
	// Server is the server as configured (its URL or command).
	Server string
	// Want is the configured pin; empty when none was given.
	Want string
	// Got is the digest of the tool list the server offers now.
	Got string
	// Changed names what differs from the pinned definitions when they are
	// known ("tool \"echo\": description"); empty otherwise.
	Changed []string
}

func (e *PinError) Error() string { return "mcp server " + e.Server + ": " + e.reason() }

func (e *PinError) reason() string {
	if e.Want == "" {
		return fmt.Sprintf("no pin: its tool list is %s; review the tools (babel mcp pin) and set pin: %q to trust them", e.Got, e.Got)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tool definitions changed since they were pinned (pinned %s, server now offers %s)", e.Want, e.Got)
	if len(e.Changed) > 0 {
		b.WriteString("; changed: ")
		b.WriteString(strings.Join(e.Changed, ", "))
	}
	b.WriteString("; refused until the tools are reviewed and re-pinned")
	return b.String()
}

// refusal wraps a *PinError in the *agent.PeerError a caller classifies
// (never retryable); errors.As still finds the *PinError.
func (e *PinError) refusal(peer string) error {
	return agent.NewPeerError(peer, 0, false, e.reason(), e)
}

// ToolError carries the result of a tool call that the server marked as an
// error (isError). It is the Err of the *agent.PeerError such a call
// returns; its Error text never includes the server's words, which are in
// Result for callers that want them (a planner correcting its arguments).
type ToolError struct {
	Tool   string
	Result agent.Message
}

func (e *ToolError) Error() string { return fmt.Sprintf("tool %q returned an error result", e.Tool) }
