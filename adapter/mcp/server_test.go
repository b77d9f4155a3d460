package mcp_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
)

// serverArg, as the test binary's first argument, makes it an MCP stdio
// server instead of running tests: the stdio tests start it by its absolute
// path, as users start theirs.
const serverArg = "babel-mcp-test-server"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serverArg {
		os.Exit(stdioServer(os.Args[2:]))
	}
	goleak.VerifyTestMain(m, leaktest.Options()...)
}

// stdioServer serves the test tools on stdin/stdout. Flags: --desc TEXT
// (echo's description); --marker M is ignored, and lets a test find the
// server's processes in /proc by their command line.
func stdioServer(args []string) int {
	desc := "Echo the text back."
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--desc":
			desc = args[i+1]
		case "--marker":
		default:
			fmt.Fprintln(os.Stderr, "unknown flag", args[i])
			return 2
		}
	}
	s := newTestServer(desc, nil)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type envOut struct {
	Names    []string `json:"names"`
	Path     string   `json:"path"`
	Hostname string   `json:"hostname"`
	UID      int      `json:"uid"`
}

type dialIn struct {
	Addr string `json:"addr"`
}

type dialOut struct {
	Connected bool   `json:"connected"`
	Error     string `json:"error,omitempty"`
}

type sleepIn struct {
	MS int `json:"ms"`
}

// counters lets in-process tests see what the server did.
type counters struct {
	adds     atomic.Int64
	sessions atomic.Int64
}

// newTestServer is an MCP server (official Go SDK) with the tools the tests
// call. desc is echo's description: changing it is the rug pull.
func newTestServer(desc string, c *counters) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "babel-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: desc}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two integers."}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		if c != nil {
			c.adds.Add(1)
		}
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "List the server's environment variable names."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, envOut, error) {
		var names []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		sort.Strings(names)
		host, _ := os.Hostname()
		return nil, envOut{Names: names, Path: os.Getenv("PATH"), Hostname: host, UID: os.Getuid()}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "dial", Description: "Open a TCP connection to addr and say what happened."}, func(ctx context.Context, _ *mcp.CallToolRequest, in dialIn) (*mcp.CallToolResult, dialOut, error) {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", in.Addr)
		if err != nil {
			return nil, dialOut{Error: err.Error()}, nil
		}
		_ = c.Close()
		return nil, dialOut{Connected: true}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("the disk is on fire")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep for ms milliseconds."}, func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "awake"}}}, nil, nil
	})
	size := int64(42)
	s.AddTool(&mcp.Tool{Name: "mixed", Description: "Return one of every kind of content.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Meta: mcp.Meta{"trace": "t-1"},
				Content: []mcp.Content{
					&mcp.TextContent{Text: "hello", Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}},
					&mcp.ImageContent{Data: []byte("\x89PNG-bytes"), MIMEType: "image/png", Meta: mcp.Meta{"alt": "a dot"}},
					&mcp.AudioContent{Data: []byte("RIFF-bytes"), MIMEType: "audio/wav"},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "a note"}},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///blob.bin", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2}}},
					&mcp.ResourceLink{URI: "https://example.com/report.pdf", Name: "report.pdf", Title: "Report", MIMEType: "application/pdf", Size: &size},
					&mcp.TextContent{Text: `{"answer":42}`}, // the structured content, repeated as text
				},
				StructuredContent: map[string]any{"answer": 42},
			}, nil
		})
	return s
}

// httpServer serves newTestServer over streamable HTTP on loopback. The
// description of echo is read for each new session from desc.
func httpServer(t testing.TB, desc *atomic.Value, c *counters) *httptest.Server {
	var mu sync.Mutex
	servers := map[string]*mcp.Server{} // one per description, as a real server keeps one
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		if c != nil {
			c.sessions.Add(1)
		}
		d := desc.Load().(string)
		mu.Lock()
		defer mu.Unlock()
		if servers[d] == nil {
			servers[d] = newTestServer(d, c)
		}
		return servers[d]
	}, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
