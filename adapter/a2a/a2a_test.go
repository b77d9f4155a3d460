package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	babela2a "github.com/babelagent/babel/adapter/a2a"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/loopback"
	"github.com/babelagent/babel/internal/topotest"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
)

func compileYAML(t testing.TB, yaml string, opts *babela2a.Options) (*graph.Graph, error) {
	t.Helper()
	reg := graph.NewRegistry()
	babela2a.Register(reg, opts)
	return topotest.Compile(t, reg, yaml, nil)
}

func mustCompile(t testing.TB, yaml string, opts *babela2a.Options) *graph.Graph {
	t.Helper()
	g, err := compileYAML(t, yaml, opts)
	if err != nil {
		t.Fatalf("compile: %v\n%s", err, yaml)
	}
	return g
}

func oneNode(agentField string, extra ...string) string {
	return topotest.OneNode("remote", agentField, extra...)
}

// form writes a node reaching url in one of the topology's forms.
type form func(url string) string

var forms = map[string]form{
	"short": func(url string) string { return oneNode(`"a2a+` + url + `"`) },
	"map":   func(url string) string { return oneNode(`{a2a: {url: "` + url + `"}}`) },
}

func (s *a2aServer) node(fm form, extra ...string) string {
	out := fm(s.url) + "    allow_private: [\"" + s.private + "\"]\n"
	for _, e := range extra {
		out += "    " + e + "\n"
	}
	return out
}

func runGraph(t testing.TB, ctx context.Context, g *graph.Graph, in agent.Message) *run.Result {
	t.Helper()
	r, err := run.NewRunner(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Run(ctx, &run.Request{Graph: g, Input: in, Principal: "tester"})
}

func runYAML(t testing.TB, yaml string, opts *babela2a.Options, in agent.Message) *run.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return runGraph(t, ctx, mustCompile(t, yaml, opts), in)
}

func wantSucceeded(t testing.TB, res *run.Result) {
	t.Helper()
	if res.Status != run.StatusSucceeded {
		t.Fatalf("run %s: %s (trace %+v)", res.Status, res.Error, res.Trace)
	}
}

func wantFailed(t testing.TB, res *run.Result, substrings ...string) {
	t.Helper()
	if res.Status == run.StatusSucceeded {
		t.Fatalf("run succeeded with %q; want a failure", res.Output.Text())
	}
	for _, s := range substrings {
		if !strings.Contains(res.Error, s) {
			t.Errorf("run error %q does not say %q", res.Error, s)
		}
	}
}

// metadataResolver answers every name with the cloud metadata address, as
// a hostile or rebinding DNS server would.
var metadataResolver = loopback.StaticResolver{IP: net.ParseIP("169.254.169.254")}

// checkEgressGuard shows the egress guard applies to the form: an agent
// at the cloud metadata address is refused when the graph is compiled, and
// a name that resolves to it is refused at the address dialed, before any
// byte leaves.
func checkEgressGuard(t *testing.T, fm form) {
	t.Helper()
	_, err := compileYAML(t, fm("http://169.254.169.254/"), nil)
	if err == nil || !strings.Contains(err.Error(), "egress refused") || !strings.Contains(err.Error(), "169.254.169.254") {
		t.Errorf("an agent at the metadata address compiled (%v); want an egress refusal", err)
	}
	var n atomic.Int64
	opts := &babela2a.Options{Egress: &egress.Options{Resolver: metadataResolver, OnBytes: func(b int64) { n.Add(b) }}}
	res := runYAML(t, fm("http://agent.example.com/"), opts, agent.Text("hi"))
	wantFailed(t, res, "egress refused", "169.254.169.254")
	if b := n.Load(); b != 0 {
		t.Errorf("%d bytes went over the wire to the metadata address", b)
	}
	if res.Trace[0].Attempts != 1 {
		t.Errorf("an egress refusal was attempted %d times", res.Trace[0].Attempts)
	}
}

// allParts is one of every kind of part, with metadata.
func allParts() agent.Message {
	return agent.Message{
		Parts: []agent.Part{
			{Kind: agent.PartText, Text: "hello", Metadata: map[string]any{"lang": "en"}},
			{Kind: agent.PartText, Text: "# Title", Metadata: map[string]any{babela2a.MetaMediaType: "text/markdown"}},
			{Kind: agent.PartData, Data: json.RawMessage(`{"big":9007199254740991,"frac":0.1,"list":[1,"two",null,true],"nested":{"k":"v"}}`)},
			{Kind: agent.PartFile, File: &agent.File{Name: "dot.png", MediaType: "image/png", Bytes: []byte("\x89PNG\x00\x01")}},
			{Kind: agent.PartFile, File: &agent.File{Name: "report.pdf", MediaType: "application/pdf", URI: "https://files.example.com/report.pdf"}, Metadata: map[string]any{"pages": float64(3)}},
			{Kind: agent.PartFile, File: &agent.File{MediaType: "text/plain", URI: "file:///notes.txt", Bytes: []byte("a note")}},
		},
		Metadata: map[string]any{"request": "r-1"},
	}
}

func partsJSON(t testing.TB, parts []agent.Part) string {
	t.Helper()
	b, err := json.MarshalIndent(parts, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSendThatCompletes(t *testing.T) {
	s := newA2AServer(t, false, echoMessage)
	for name, fm := range forms {
		t.Run(name, func(t *testing.T) {
			res := runYAML(t, s.node(fm), nil, agent.Text("hello there"))
			wantSucceeded(t, res)
			if got := res.Output.Text(); got != "hello there" {
				t.Errorf("output %q, want the agent's reply", got)
			}
			if !res.Labels.Has(agent.Untrusted) {
				t.Errorf("labels %v: a remote agent's answer must be untrusted", res.Labels)
			}
			c := mustCompile(t, s.node(fm), nil).Nodes[0].Card
			if c.Kind != "a2a" || !c.ReadsOutside || !c.Has(agent.EffectEgress) || len(c.Egress) != 1 || c.Egress[0] != "127.0.0.1" {
				t.Errorf("card %+v: want kind a2a, reads outside, effect egress, egress [127.0.0.1]", c)
			}
			checkEgressGuard(t, fm)
		})
	}
	if n := s.methods.count("SendMessage"); n != 2 {
		t.Errorf("SendMessage handled %d times, want 2", n)
	}
}

func TestDiscoverReadsTheRemoteCard(t *testing.T) {
	s := newA2AServer(t, false, echoMessage)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := babela2a.Discover(ctx, &babela2a.Config{URL: s.url, AllowPrivate: []string{s.private}})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Card(); c.Name != "Echo Agent" || c.Description != "Says back what it is told." || c.Kind != "a2a" {
		t.Errorf("card %+v: want the remote card's name and description", c)
	}
	g, err := graph.New("t").Add("remote", a).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantSucceeded(t, runGraph(t, ctx, g, agent.Text("hi")))

	for _, url := range []string{"http://169.254.169.254/", "http://[::ffff:a9fe:a9fe]/"} {
		_, err = babela2a.Discover(ctx, &babela2a.Config{URL: url})
		var pe *egress.PolicyError
		if !errors.As(err, &pe) {
			t.Errorf("Discover(%s): %v; want an *egress.PolicyError", url, err)
		}
	}
	checkEgressGuard(t, forms["map"])
}

func TestStreamedTask(t *testing.T) {
	s := newA2AServer(t, true, echoTask)
	in := allParts()
	res := runYAML(t, s.node(forms["short"]), nil, in)
	wantSucceeded(t, res)
	if got, want := partsJSON(t, res.Output.Parts), partsJSON(t, in.Parts); got != want {
		t.Errorf("streamed artifact parts:\n%s\nwant:\n%s", got, want)
	}
	if st := res.Output.Metadata[babela2a.MetaState]; st != string(a2a.TaskStateCompleted) {
		t.Errorf("state %v, want completed", st)
	}
	arts, _ := res.Output.Metadata[babela2a.MetaArtifacts].([]map[string]any)
	if len(arts) != 1 || arts[0]["name"] != "echo" || arts[0]["parts"] != len(in.Parts) {
		t.Errorf("artifacts %v: want one artifact named echo, assembled from its chunks", arts)
	}
	if n := s.methods.count("SendStreamingMessage"); n != 1 {
		t.Errorf("SendStreamingMessage handled %d times, want 1", n)
	}
	if n := s.methods.count("GetTask"); n != 0 {
		t.Errorf("a streamed task was polled %d times", n)
	}
	checkEgressGuard(t, forms["short"])
}

func TestPartsRoundTripWithoutLoss(t *testing.T) {
	for name, tc := range map[string]struct {
		streaming bool
		execute   executeFunc
		extra     []string
	}{
		"message reply": {false, echoMessage, nil},
		"polled task":   {false, echoTask, nil},
		"streamed task": {true, echoTask, nil},
		"stream: false": {true, echoTask, []string{"with: {stream: false}"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := newA2AServer(t, tc.streaming, tc.execute)
			in := allParts()
			res := runYAML(t, s.node(forms["map"], tc.extra...), nil, in)
			wantSucceeded(t, res)
			if got, want := partsJSON(t, res.Output.Parts), partsJSON(t, in.Parts); got != want {
				t.Errorf("parts came back as:\n%s\nwant:\n%s", got, want)
			}
			if err := res.Output.Validate(); err != nil {
				t.Errorf("output is not a valid message: %v", err)
			}
			checkEgressGuard(t, forms["map"])
		})
	}
}

func TestLongTaskIsPolledThenCancelledWithTheRun(t *testing.T) {
	for name, streaming := range map[string]bool{"polled": false, "streamed": true} {
		t.Run(name, func(t *testing.T) {
			s := newA2AServer(t, streaming, slowTask)
			g := mustCompile(t, s.node(forms["short"]), &babela2a.Options{PollInterval: 20 * time.Millisecond, MaxPollInterval: 80 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan *run.Result, 1)
			go func() { done <- runGraph(t, ctx, g, agent.Text("take your time")) }()

			deadline := time.Now().Add(10 * time.Second)
			for (!streaming && s.methods.count("GetTask") < 3) || (streaming && s.methods.count("SendStreamingMessage") < 1) {
				if time.Now().After(deadline) {
					t.Fatal("the task was never followed")
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			cancelled := time.Now()
			cancel()
			var res *run.Result
			select {
			case res = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the run did not return after it was cancelled")
			}
			if d := time.Since(cancelled); d > time.Second {
				t.Errorf("the run took %v to stop", d)
			}
			if res.Status != run.StatusCancelled {
				t.Errorf("status %s (%s), want cancelled", res.Status, res.Error)
			}
			select {
			case id := <-s.cancelled:
				if id == "" {
					t.Error("the server was asked to cancel no task")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the server never saw CancelTask")
			}
			if n := s.methods.count("CancelTask"); n != 1 {
				t.Errorf("CancelTask handled %d times, want 1", n)
			}
			checkEgressGuard(t, forms["short"])
		})
	}
}

func TestFailedTaskIsAPeerErrorWithoutTheAgentsWords(t *testing.T) {
	s := newA2AServer(t, false, failingTask)
	res := runYAML(t, s.node(forms["map"], "retry: {max: 2}"), nil, agent.Text("go"))
	wantFailed(t, res, "ended in state TASK_STATE_FAILED")
	if strings.Contains(res.Error, "on fire") {
		t.Errorf("the agent's own words reached the run error: %q", res.Error)
	}
	if res.Trace[0].Attempts != 1 {
		t.Errorf("a failed task was attempted %d times; the agent decided, retrying does not help", res.Trace[0].Attempts)
	}
	checkEgressGuard(t, forms["map"])
}

func TestCardEndpointOnAnUndeclaredAddressIsRefused(t *testing.T) {
	card := &a2a.AgentCard{
		Name:                "Redirector",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface("http://169.254.169.254/rpc", a2a.TransportProtocolJSONRPC)},
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s := &a2aServer{url: srv.URL + "/", private: egress.AllowPrivateURL(srv.URL)}
	res := runYAML(t, s.node(forms["short"]), nil, agent.Text("hi"))
	wantFailed(t, res, "egress refused", "169.254.169.254")
	checkEgressGuard(t, forms["short"])
}

func TestBadConfigurationIsALoadErrorNamingTheProblem(t *testing.T) {
	for _, tc := range []struct{ name, agent, want string }{
		{"no url", `{a2a: {stream: true}}`, "no url"},
		{"unknown key", `{a2a: {url: "https://agent.example.com/", token: x}}`, `unknown key "token"`},
		{"bad scheme", `{a2a: {url: "ftp://agent.example.com/"}}`, "scheme must be https or http"},
		{"credentials in url", `"a2a+https://me:hunter2@agent.example.com/"`, "credentials do not belong in a URL"},
		{"stream not a bool", `{a2a: {url: "https://agent.example.com/", stream: "yes"}}`, "stream: want true or false"},
		{"short form without host", `"a2a+https:agent.example.com"`, "want a2a+https://host/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileYAML(t, oneNode(tc.agent), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "remote"`) {
				t.Errorf("error %v: want it to name the node and say %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q repeats the URL's password", err)
			}
		})
	}
	// Compiling never connects: an agent nobody serves compiles.
	if _, err := compileYAML(t, oneNode(`"a2a+https://agent.invalid/"`), nil); err != nil {
		t.Error(err)
	}
}

func TestAgentBehindABearerToken(t *testing.T) {
	requireToken := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok-51c0ffee" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	s := newA2AServer(t, false, echoMessage, requireToken)
	node := `{a2a: {url: "` + s.url + `", auth: {bearer: AGENT_TOKEN}}}`
	g := mustCompile(t, s.node(func(string) string { return oneNode(node, "secrets: [AGENT_TOKEN]") }), nil)
	if c := g.Nodes[0].Card; len(c.Secrets) != 1 || c.Secrets[0] != "AGENT_TOKEN" {
		t.Errorf("card secrets %v, want [AGENT_TOKEN]", c.Secrets)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Secrets: secretScoper{"AGENT_TOKEN": "tok-51c0ffee"}})})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Run(ctx, &run.Request{Graph: g, Input: agent.Text("with a token")})
	wantSucceeded(t, res)
	if res.Output.Text() != "with a token" {
		t.Errorf("output %q", res.Output.Text())
	}

	// Without the token the agent refuses, and the error says how.
	res = runYAML(t, s.node(forms["map"]), nil, agent.Text("no token"))
	wantFailed(t, res, "read agent card", "Unauthorized", "status 401")

	// A node that does not declare the secret cannot name it.
	if _, err := compileYAML(t, s.node(func(string) string { return oneNode(node) }), nil); err == nil || !strings.Contains(err.Error(), "does not declare") {
		t.Errorf("auth naming an undeclared secret: %v", err)
	}
	checkEgressGuard(t, forms["map"])
}

type secretScoper map[string]string

func (s secretScoper) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	var out []secrets.Secret
	for _, n := range names {
		v, ok := s[n]
		if !ok {
			return nil, errors.New("secret " + n + " not found")
		}
		out = append(out, secrets.New(n, v))
	}
	return agent.NewSecrets(out...), nil
}
