package serve

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/graph"
)

// envStdioGraphs, when set, makes the test binary an MCP stdio server for
// the comma-separated topology files it names: what `babel mcp FILE...`
// does, for clients that start a server process (the TypeScript SDK).
const envStdioGraphs = "BABEL_TEST_MCP_STDIO_GRAPHS"

func serveStdioForTest(paths string) int {
	var graphs []*graph.Graph
	for _, p := range strings.Split(paths, ",") {
		spec, err := graph.LoadFile(p)
		if err != nil {
			_, _ = io.WriteString(os.Stderr, err.Error()+"\n")
			return 2
		}
		g, err := graph.Compile(spec, catalog.Registry(nil), nil)
		if err != nil {
			_, _ = io.WriteString(os.Stderr, err.Error()+"\n")
			return 2
		}
		graphs = append(graphs, g)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := ServeStdio(ctx, graphs, os.Stdin, os.Stdout, &StdioOptions{Principal: "local:interop"})
	if err != nil {
		_, _ = io.WriteString(os.Stderr, err.Error()+"\n")
		return 1
	}
	return 0
}
