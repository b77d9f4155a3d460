package mcp_test

import (
	"context"
	"fmt"
	"time"

	babelmcp "github.com/babelagent/babel/adapter/mcp"
	"github.com/babelagent/babel/graph"
)

// A node calls one tool of a server, named with its pin. Compiling neither
// starts the server nor connects to it.
func ExampleRegister() {
	spec, err := graph.Parse([]byte(`
name: lookup
nodes:
  - name: search
    agent: "mcp+https://tools.example.com/mcp"
    with:
      tool: search
      pin: "sha256:6d1f0a4c3b2e5f7a8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := graph.NewRegistry()
	babelmcp.Register(reg, nil)
	g, err := graph.Compile(spec, reg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := g.Nodes[0].Card
	fmt.Println(c.Kind, c.Name, c.Effects, c.Egress)
	// Output: mcp search [egress] [tools.example.com]
}

// Pin is what a person runs to review a server before trusting it.
func ExamplePin() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := babelmcp.Pin(ctx, &babelmcp.Config{URL: "http://169.254.169.254/mcp"})
	fmt.Println(err)
	// Output: egress refused: 169.254.169.254: link-local address
}
