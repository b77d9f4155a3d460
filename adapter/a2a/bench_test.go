package a2a_test

import (
	"context"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/run"
)

// The cost of one remote call as a node: the card is read, a client opened,
// the message sent and the reply (or the streamed task) read.
func benchRemote(b *testing.B, streaming bool, execute executeFunc) {
	s := newA2AServer(b, streaming, execute)
	g := mustCompile(b, s.node(forms["short"]), nil)
	r, err := run.NewRunner(nil)
	if err != nil {
		b.Fatal(err)
	}
	in := agent.Text("hello")
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Run(context.Background(), &run.Request{Graph: g, Input: in}); res.Status != run.StatusSucceeded {
			b.Fatalf("%s: %s", res.Status, res.Error)
		}
	}
}

func BenchmarkSendMessage(b *testing.B)  { benchRemote(b, false, echoMessage) }
func BenchmarkStreamedTask(b *testing.B) { benchRemote(b, true, echoTask) }
