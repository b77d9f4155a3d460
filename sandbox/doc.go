// Package sandbox runs code that a model or a caller supplies — a WebAssembly
// module, JavaScript, Python, a program — confined, without the server's
// environment, under hard limits.
//
// Two kinds share one interface, Sandbox:
//
//   - Wasm (kind "wasm") runs a WASI module, or JavaScript on QuickJS compiled
//     to WebAssembly, on wazero: a fresh module instance per call, no
//     preopened directory, no socket, no environment variable but those the
//     caller declares, linear memory capped per call, and the call's context
//     closes the instance when its deadline passes. The guest runs inside
//     the server process, fenced by WebAssembly's memory safety and by
//     imports that grant nothing: a bug in wazero would land an escape in
//     the server, which the os kind's separate process would not.
//     JavaScript calls start from a snapshot of a QuickJS runtime created
//     once per sandbox (see jsTemplate), copied into each call's fresh
//     instance, with the call's heap limit and a fresh Math.random seed.
//   - OS (kind "os") runs a program under bubblewrap: every namespace
//     unshared (network included), an unprivileged user with no capability
//     (and, when the server runs as root, bubblewrap itself runs as nobody),
//     no_new_privs, a seccomp filter, a read-only /usr, an empty private
//     /tmp and work directory destroyed after the call, and rlimits on CPU
//     time, address space, processes and file size, set by a shell prologue
//     inside the sandbox before it execs the program. OS.Start runs a
//     long-lived program (a stdio MCP server) with pipes instead.
//     HostProgram places a host program in it: in place under /usr, else
//     as a read-only copy in the work directory.
//
// Python runs on the system python3 in the os sandbox, JavaScript on QuickJS
// in the wasm sandbox; Code picks by language and CodeAgent makes a code
// node an agent.Agent.
//
// What this package must never do: run caller-supplied code as native code
// of the server, or on the host when a sandbox cannot start (there is no
// fallback: Run returns a *SetupError), hand the server's environment to a
// sandbox (Spec.Env is the whole environment, and holds only what a node
// declared), or leave a process behind after Run returns.
//
// Network for sandboxed code is off: the os sandbox has its own network
// namespace with nothing but loopback, the wasm sandbox has no sockets.
// An os-sandbox Spec that sets Egress (a Python code node, a process node
// that declares egress hosts) gets an HTTP proxy at ProxyAddr inside its
// namespace, named by HTTP_PROXY and HTTPS_PROXY: a relay there hands each
// connection's socket, over a socketpair, to a per-call proxy in the
// server, which serves CONNECT and plain-HTTP requests only to targets the
// egress guard allows (the node's allowlist, and the address dialed
// checked at connect time), answers 403 to anything else, counts the
// bytes, and is gone when the call returns. JavaScript with Spec.Egress
// gets a fetch function instead, bound to a host function that makes each
// request in the server through an egress.Client under the same options
// (see jsfetch.go); without it, fetch does not exist. WASI modules have no
// network.
package sandbox
