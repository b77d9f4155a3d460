package mcp_test

import (
	"context"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// The cost of one tool call as a node, session opened and closed within the
// call: connect (initialize), tools/list and the pin check, argument
// validation, tools/call, close (DELETE over HTTP; stdin close and reap over
// stdio).

func benchRun(b *testing.B, g *graph.Graph) {
	r, err := run.NewRunner(nil)
	if err != nil {
		b.Fatal(err)
	}
	in := agent.Text(`{"a":2,"b":3}`)
	b.ReportAllocs()
	for b.Loop() {
		res := r.Run(context.Background(), &run.Request{Graph: g, Input: in})
		if res.Status != run.StatusSucceeded {
			b.Fatalf("%s: %s", res.Status, res.Error)
		}
	}
}

func BenchmarkToolCallStreamableHTTP(b *testing.B) {
	f := newHTTPFixture(b)
	benchRun(b, mustCompile(b, f.node(httpForms["short"], "add", pinOf(b, f.config())), nil))
}

func BenchmarkToolCallStdio(b *testing.B) {
	f := newStdioFixture(b)
	benchRun(b, mustCompile(b, oneNode(`"`+f.shortForm()+`"`, "with: {tool: add, pin: "+pinOf(b, f.config())+"}"), nil))
}
