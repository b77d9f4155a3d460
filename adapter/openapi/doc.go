// Package openapi makes one operation of an OpenAPI 3.x document an agent.
//
// In a topology:
//
//	agent: {openapi: {spec: "https://api.example.com/openapi.yaml", operation: createTicket,
//	                  digest: "sha256:…", auth: {bearer: TICKETS_TOKEN}}}
//	secrets: [TICKETS_TOKEN]
//
// The agent's input is a JSON object holding the operation's parameters by
// name and its request body under "body"; its card's input schema says
// exactly that (additionalProperties false), so the kernel checks every
// call against it, and the agent checks the request it builds against the
// document (kin-openapi's openapi3filter) before anything is sent. The
// response is mapped as package http maps it.
//
// The document is read once, when the graph is compiled: from a file
// (relative paths resolve against Options.Dir) or over https through the
// egress guard. It is data: it is parsed, never executed, and a $ref
// outside it is refused. A document fetched over the network must be
// pinned with digest: (the error names the digest to pin); a pinned
// document that changed fails with a digest mismatch. The server URL the
// document (or server:) names must pass the egress guard and the node's
// allowlist, like any URL.
//
// This package must never: follow a reference out of the document, send a
// request whose arguments the document's schemas refuse, use a document
// whose digest does not match its pin, or send a request but through the
// egress guard.
package openapi
