// Package a2a makes a remote Agent2Agent (A2A) agent an agent.Agent, with
// the official A2A Go SDK: it reads the agent's card
// (/.well-known/agent-card.json), sends the node's input as a message
// (SendMessage, or SendStreamingMessage when the agent streams), follows a
// task to its end by streaming or by polling GetTask with a backoff bounded
// by the call's context, and cancels the remote task (CancelTask) when the
// call's context ends first. Parts translate without loss in both
// directions: text, data, and files by bytes or by URI, with their
// metadata. (Numbers in data parts travel as I-JSON doubles: the SDK
// decodes them so at both ends, so an integer beyond 2^53 loses digits.)
//
// What this package must never do: connect except through the egress
// guard's client with the node's declared hosts (the agent card's endpoint
// URLs are untrusted and pass the same guard); fetch a card or connect while
// a graph is compiled; run outside a kernel call that declared the egress
// effect; put a remote agent's own words in an error's message (they are
// kept in a *TaskError for callers that want them); or leave a remote task
// running after its call was cancelled without asking the agent to cancel
// it.
package a2a
