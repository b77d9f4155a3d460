package a2a_test

import (
	"fmt"

	babela2a "github.com/babelagent/babel/adapter/a2a"
	"github.com/babelagent/babel/graph"
)

// A node that is a remote A2A agent. Compiling does not read its card.
func ExampleRegister() {
	spec, err := graph.Parse([]byte(`
name: delegate
nodes:
  - name: planner
    agent: "a2a+https://agents.example.com/planner/"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := graph.NewRegistry()
	babela2a.Register(reg, nil)
	g, err := graph.Compile(spec, reg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := g.Nodes[0].Card
	fmt.Println(c.Kind, c.Name, c.Effects, c.Egress, c.ReadsOutside)
	// Output: a2a https://agents.example.com/planner/ [egress] [agents.example.com] true
}
