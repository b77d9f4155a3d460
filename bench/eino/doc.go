// Package eino compares Babelagent's scheduler with cloudwego/eino's compose
// graphs on the same shapes of no-op nodes. It is a separate module so that
// the core never depends on eino; it holds benchmarks only.
package eino
