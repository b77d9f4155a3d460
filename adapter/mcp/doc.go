// Package mcp brings the tools of a Model Context Protocol server into
// Babelagent: each tool of a server becomes an agent.Agent, reached over
// stdio (a process confined by the os sandbox) or streamable HTTP, with the
// official Go SDK.
//
// A server's tool definitions are third-party code in all but name: a
// description or an input schema steers a model and decides what a call
// sends. So the tool list (names, titles, descriptions, input and output
// schemas, annotations) is pinned by a sha256 digest when a node is
// configured (Pin computes it), every session checks the list against the
// pin, and a server whose tools changed is refused with a *PinError until a
// person reviews and re-pins it. Arguments are validated against the pinned
// input schema before the call; results become Message parts without loss.
//
// What this package must never do: call a tool whose definitions were not
// pinned or no longer match their pin; start a stdio server outside the os
// sandbox (bubblewrap: no network, no view of the host's files, killed
// whole with its session), or start it unconfined when that sandbox cannot
// start; hand a stdio server the parent's environment (it gets
// PATH=/usr/bin:/bin, the secrets its node declared and the sandbox's HOME,
// TMPDIR, LANG and PWD, nothing else); look a stdio command up in PATH or the
// working directory (the command is an absolute path); connect over HTTP
// except through the egress guard's client with the node's declared hosts;
// connect to a server or start a process while a graph is compiled; or run
// a server outside a kernel call that declared the exec (stdio) or egress
// (HTTP) effect.
//
// Sessions are opened per call and closed before Run returns: nothing of a
// server — process, connection, session state — outlives the call that
// needed it.
package mcp
