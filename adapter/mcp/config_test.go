package mcp_test

import (
	"strings"
	"testing"

	babelmcp "github.com/babelagent/babel/adapter/mcp"
)

func TestBadConfigurationIsALoadErrorNamingTheProblem(t *testing.T) {
	pin := "sha256:" + strings.Repeat("b", 64)
	for _, tc := range []struct {
		name, agent string
		extra       []string
		want        string
	}{
		{"no pin", `"mcp+stdio:/usr/bin/server"`, []string{"with: {tool: echo}"}, "no pin"},
		{"malformed pin", `"mcp+stdio:/usr/bin/server"`, []string{"with: {tool: echo, pin: sha256:abc}"}, "64 lowercase hex"},
		{"no tool", `"mcp+stdio:/usr/bin/server"`, []string{"with: {pin: " + pin + "}"}, "no tool"},
		{"relative command", `"mcp+stdio:./server"`, []string{"with: {tool: echo, pin: " + pin + "}"}, "absolute path"},
		{"bare command", `"mcp+stdio:npx -y some-server@latest"`, []string{"with: {tool: echo, pin: " + pin + "}"}, "never looked up in PATH"},
		{"unknown key", `{mcp: {url: "https://tools.example.com/mcp", tool: echo, pin: "` + pin + `", env: {A: b}}}`, nil, `unknown key "env"`},
		{"url and command", `{mcp: {url: "https://tools.example.com/mcp", command: /usr/bin/x, tool: echo, pin: "` + pin + `"}}`, nil, "not both"},
		{"no server", `{mcp: {tool: echo, pin: "` + pin + `"}}`, nil, "no server"},
		{"credentials in url", `"mcp+https://user:hunter2@tools.example.com/mcp"`, []string{"with: {tool: echo, pin: " + pin + "}"}, "credentials do not belong in a URL"},
		{"bad scheme", `{mcp: {url: "ftp://tools.example.com/mcp", tool: echo, pin: "` + pin + `"}}`, nil, "scheme must be https or http"},
		{"args for a url", `{mcp: {url: "https://tools.example.com/mcp", args: [x], tool: echo, pin: "` + pin + `"}}`, nil, "args apply to a stdio command"},
		{"auth for stdio", `{mcp: {command: /usr/bin/server, tool: echo, pin: "` + pin + `", auth: {bearer: TOKEN}}}`, nil, "headers and auth apply to a url"},
		{"unknown auth key", `{mcp: {url: "https://tools.example.com/mcp", tool: echo, pin: "` + pin + `", auth: {basic: TOKEN}}}`, nil, "basic"},
		{"tool not a string", `{mcp: {url: "https://tools.example.com/mcp", tool: 3, pin: "` + pin + `"}}`, nil, "tool: want a string"},
		{"bad allow_private", `"mcp+https://tools.example.com/mcp"`, []string{"with: {tool: echo, pin: " + pin + "}", "allow_private: [\"10.0.0.1:80\", \"10.0.0.2:80\"]"}, "allow_private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileYAML(t, oneNode(tc.agent, tc.extra...), nil)
			if err == nil {
				t.Fatal("compiled; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "tool"`) {
				t.Errorf("error %q: want it to name the node and say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q repeats the URL's password", err)
			}
		})
	}
}

func TestCompilingNeverStartsOrConnects(t *testing.T) {
	starter := &countingStarter{}
	pin := "sha256:" + strings.Repeat("c", 64)
	_, err := compileYAML(t, oneNode(`"mcp+stdio:`+testBinary(t)+` `+serverArg+`"`, "with: {tool: echo, pin: "+pin+"}"), &babelmcp.Options{Starter: starter})
	if err != nil {
		t.Fatal(err)
	}
	if n := starter.n.Load(); n != 0 {
		t.Errorf("compiling started the server %d times", n)
	}
	// A URL nothing listens on compiles: the factory does not dial.
	if _, err := compileYAML(t, oneNode(`"mcp+https://tools.invalid/mcp"`, "with: {tool: echo, pin: "+pin+"}"), nil); err != nil {
		t.Fatal(err)
	}
}
