package adapt_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"

	"github.com/babelagent/babel/adapter/adapt"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/builtin"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

// runOne runs a one-node graph of a, the way users run agents.
func runOne(t *testing.T, a agent.Agent, in agent.Message, opts ...graph.NodeOption) *run.Result {
	t.Helper()
	g, err := graph.New("adapted").Add("n", a, opts...).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := run.NewRunner(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Run(context.Background(), &run.Request{Graph: g, Input: in})
}

func closeAgent(t *testing.T, a agent.Agent) {
	t.Cleanup(func() {
		if c, ok := a.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	})
}

func TestAnAgentIsReturnedAsIs(t *testing.T) {
	up := builtin.Upper()
	a, err := adapt.Adapt(up, nil)
	if err != nil || a != up {
		t.Fatalf("got %v, %v", a, err)
	}
}

func TestPlainFunctionsBecomeAgents(t *testing.T) {
	greet, err := adapt.Adapt(func(_ context.Context, s string) (string, error) { return "hello " + s, nil }, &adapt.Options{Name: "greet"})
	if err != nil {
		t.Fatal(err)
	}
	if res := runOne(t, greet, agent.Text("ada")); res.Status != run.StatusSucceeded || res.Output.Text() != "hello ada" {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
	if c := greet.Card(); c.Name != "greet" || c.Kind != "fn" {
		t.Fatalf("card %+v", c)
	}

	count, err := adapt.Adapt(func(_ context.Context, m map[string]any) (map[string]any, error) {
		return map[string]any{"keys": len(m)}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := agent.Data(map[string]any{"a": 1, "b": 2})
	if res := runOne(t, count, in); res.Status != run.StatusSucceeded || res.Output.Text() != `{"keys":2}` {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}

	type handler func(context.Context, agent.Message) (agent.Message, error)
	var h handler = func(_ context.Context, m agent.Message) (agent.Message, error) {
		return agent.Text(strings.ToUpper(m.Text())), nil
	}
	echo, err := adapt.Adapt(h, &adapt.Options{Name: "shout"})
	if err != nil {
		t.Fatal(err)
	}
	if res := runOne(t, echo, agent.Text("hi")); res.Status != run.StatusSucceeded || res.Output.Text() != "HI" {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
}

func TestATypedFunctionIsSentToAgentFunc(t *testing.T) {
	type transfer struct {
		Amount int    `json:"amount"`
		To     string `json:"to"`
	}
	_, err := adapt.Adapt(func(_ context.Context, in transfer) (string, error) { return "ok", nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "wrap it with agent.Func[In, Out]") || !strings.Contains(err.Error(), "adapt_test.transfer") {
		t.Fatalf("got %v", err)
	}
	// What agent.Func gives instead: a spread argument is an error naming it.
	f := agent.MustFunc("transfer", func(_ context.Context, in transfer) (string, error) { return "ok", nil }, nil)
	a, err := adapt.Adapt(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := runOne(t, a, agent.JSON([]byte(`{"amount":1,"to":"x","admin":true}`)))
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, "admin") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
}

func TestAURLIsAnHTTPEndpoint(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"method":"`+r.Method+`","got":`+string(b)+`}`)
	}))
	defer srv.Close()
	a, err := adapt.Adapt(srv.URL+"/v1/classify", &adapt.Options{Egress: &egress.Options{AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}})
	if err != nil {
		t.Fatal(err)
	}
	closeAgent(t, a)
	if c := a.Card(); c.Kind != "http" || c.EffectList() != "egress,write" {
		t.Fatalf("card %+v", c)
	}
	in, _ := agent.Data(map[string]int{"n": 1})
	res := runOne(t, a, in)
	if res.Status != run.StatusSucceeded || res.Output.Text() != `{"method":"POST","got":{"n":1}}` || hits.Load() != 1 {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
}

func TestAURLWithAnOperationIsAnOpenAPIOperation(t *testing.T) {
	doc := []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"/api"}],
"paths":{"/echo":{"get":{"operationId":"echo","parameters":[{"name":"q","in":"query","required":true,"schema":{"type":"string"}}],"responses":{"200":{"description":"ok"}}}}}}`)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			_, _ = w.Write(doc)
			return
		}
		hits.Add(1)
		_, _ = io.WriteString(w, "q="+r.URL.Query().Get("q"))
	}))
	defer srv.Close()
	sum := sha256.Sum256(doc)
	a, err := adapt.Adapt(srv.URL+"/openapi.json", &adapt.Options{Operation: "echo", Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Egress: &egress.Options{AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}}})
	if err != nil {
		t.Fatal(err)
	}
	closeAgent(t, a)
	if c := a.Card(); c.Kind != "openapi" || c.EffectList() != "read" {
		t.Fatalf("card %+v", c)
	}
	res := runOne(t, a, agent.JSON([]byte(`{"q":"hi"}`)))
	if res.Status != run.StatusSucceeded || res.Output.Text() != "q=hi" {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
	if res := runOne(t, a, agent.JSON([]byte(`{"q":1}`))); res.Status != run.StatusFailed || hits.Load() != 1 {
		t.Fatalf("invalid args: %s, %d hits", res.Status, hits.Load())
	}
}

func TestModelShortForms(t *testing.T) {
	for _, tc := range []struct{ in, kind, secret, host string }{
		{"openai:gpt-4o-mini", "llm", "OPENAI_API_KEY", "api.openai.com"},
		{"anthropic:claude-sonnet-4-5", "llm", "ANTHROPIC_API_KEY", "api.anthropic.com"},
	} {
		a, err := adapt.Adapt(tc.in, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		closeAgent(t, a)
		c := a.Card()
		if c.Kind != tc.kind || len(c.Secrets) != 1 || c.Secrets[0] != tc.secret || c.Egress[0] != tc.host || c.EffectList() != "read" {
			t.Fatalf("%s: card %+v", tc.in, c)
		}
	}
	_, err := adapt.Adapt("ollama:llama3.2", nil)
	if err == nil || !strings.Contains(err.Error(), "allow_private") {
		t.Fatalf("ollama on loopback without an opt-in: got %v", err)
	}
	a, err := adapt.Adapt("ollama:llama3.2", &adapt.Options{Egress: &egress.Options{AllowPrivate: []string{"127.0.0.1:11434"}}})
	if err != nil {
		t.Fatal(err)
	}
	closeAgent(t, a)
	if len(a.Card().Secrets) != 0 {
		t.Fatalf("ollama needs no key: %+v", a.Card())
	}
}

func TestPrefixHooksAddShortForms(t *testing.T) {
	_, err := adapt.Adapt("mcp+stdio:npx -y @acme/tools", nil)
	if err == nil || !strings.Contains(err.Error(), `no adapter for "mcp+stdio:"`) || !strings.Contains(err.Error(), "Options.Prefixes") {
		t.Fatalf("got %v", err)
	}
	var got string
	opts := &adapt.Options{Prefixes: map[string]adapt.Constructor{
		"mcp+stdio": func(target string, _ *adapt.Options) (agent.Agent, error) { got = target; return builtin.Echo(), nil },
	}}
	a, err := adapt.Adapt("mcp+stdio:npx -y @acme/tools", opts)
	if err != nil || got != "npx -y @acme/tools" || a == nil {
		t.Fatalf("hook got %q: %v", got, err)
	}
	_, err = adapt.Adapt("a2a+https://agent.example.com", opts)
	if err == nil || !strings.Contains(err.Error(), "mcp+stdio:") {
		t.Fatalf("the error should list the known short forms: %v", err)
	}
}

func TestWhatCannotBeAdaptedIsNamed(t *testing.T) {
	for _, tc := range []struct {
		x    any
		want string
	}{
		{nil, "nothing to adapt"},
		{42, "cannot make an agent of a int"},
		{"just words", "want a URL or a short form"},
		{"gopher://127.0.0.1:25/", `no adapter for "gopher:"`},
		{"https://169.254.169.254/latest/meta-data/", "egress refused"},
		{"http://localhost:8080/x", "egress refused"},
		{"openai:", "model is missing"},
		{func() {}, "wrap it with agent.Func"},
	} {
		_, err := adapt.Adapt(tc.x, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.x, err, tc.want)
		}
	}
	var pe *egress.PolicyError
	if _, err := adapt.Adapt("http://10.0.0.5/x", nil); !errors.As(err, &pe) {
		t.Fatalf("a private URL must fail with an *egress.PolicyError, got %v", err)
	}
}
