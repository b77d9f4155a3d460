// Package http makes a JSON or text HTTP endpoint an agent: the input
// message becomes the request (a JSON or text body, or a query string for
// GET), and the response becomes the output message (JSON → a data part,
// text → a text part, anything else → a file part).
//
// In a topology:
//
//	agent: {http: {url: "https://api.example.com/v1/x", method: POST,
//	               headers: {X-Team: support}, auth: {bearer: API_TOKEN}}}
//	secrets: [API_TOKEN]
//	egress: [api.example.com]
//
// or in short, for a POST: agent: https://api.example.com/v1/x
//
// Every request goes through the egress guard (package egress), built from
// the node's declared egress hosts (or, when it declares none, the URL's own
// host) and allow_private targets; the URL is checked when the graph is
// compiled and every address is checked again when it is dialed. An agent
// asks agent.Permit for its effect (read for GET, egress and write for the
// other methods) before it sends anything.
//
// This package must never: send a request without the egress guard, follow
// a redirect, put a secret's value or a peer's response body into an error,
// a log line or a card, or read a secret other than the ones the node
// declares (and then only from agent.SecretsFrom at call time).
//
// It also exports the pieces other HTTP-speaking adapters build on: Egress
// (a guarded client from a node's declarations), Headers (static and secret
// headers) and Exchange (send a request, map the response or the failure).
package http
