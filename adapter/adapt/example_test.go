package adapt_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/babelagent/babel/adapter/adapt"
	"github.com/babelagent/babel/adapter/llm"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

// A plain Go function becomes a node of a graph.
func ExampleAdapt() {
	title, err := adapt.Adapt(func(_ context.Context, s string) (string, error) {
		return strings.ToUpper(s[:1]) + s[1:], nil
	}, &adapt.Options{Name: "title"})
	if err != nil {
		panic(err)
	}
	g, err := graph.New("greeting").Add("title", title).Build(nil)
	if err != nil {
		panic(err)
	}
	r, _ := run.NewRunner(nil)
	res := r.Run(context.Background(), &run.Request{Graph: g, Input: agent.Text("hello, world")})
	fmt.Println(res.Status, res.Output.Text())
	// Output: succeeded Hello, world
}

// A model short form becomes an LLM agent whose card names the secret its
// node must declare and the host it will reach.
func ExampleAdapt_model() {
	a, err := adapt.Adapt("anthropic:claude-sonnet-4-5", &adapt.Options{LLM: &llm.Config{System: "Be brief.", Prompt: "Summarize: {{.input}}"}})
	if err != nil {
		panic(err)
	}
	c := a.Card()
	fmt.Println(c.Kind, c.Secrets, c.Egress, c.EffectList())
	// Output: llm [ANTHROPIC_API_KEY] [api.anthropic.com] read
}
