package anthropic_test

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
	"github.com/babelagent/babel/internal/loopback"
	"github.com/babelagent/babel/internal/topotest"

	"github.com/babelagent/babel/adapter/llm"
	"github.com/babelagent/babel/adapter/llm/anthropic"
	"github.com/babelagent/babel/adapter/llm/internal/llmtest"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/run"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

const apiKey = "sk-ant-test-7e2b9c4d1f0a48e3b6c5d2a1f0e9d8c7"

func registry(opts *llm.Options) *graph.Registry { return llmtest.Registry(opts, anthropic.Provider()) }

func weather(calls *atomic.Int64) agent.Agent {
	return llmtest.Weather(calls, "Current weather for a city.")
}

func assistant(srv *llmtest.Replay, extra string) string {
	return fmt.Sprintf(`
name: ask
nodes:
  - name: assistant
    agent: anthropic:claude-sonnet-4-5
    with: {base_url: "%s", system: "You answer weather questions.", prompt: "Question: {{.input}}"%s}
    secrets: [ANTHROPIC_API_KEY]
    allow_private: ["%s"]
    tools: [weather, shout]
tools:
  - name: weather
  - name: shout
    agent: builtin:upper
`, srv.URL, extra, srv.Private())
}

func TestToolUseRunsTheGraphToolOnceAndTheAnswerUsesItsResult(t *testing.T) {
	srv := llmtest.NewReplay(t, "/v1/messages", llmtest.Reply{File: "tool_use.sse"}, llmtest.Reply{File: "final_answer.sse"})
	var calls atomic.Int64
	g, err := topotest.Compile(t, registry(nil), assistant(srv, ""), map[string]agent.Agent{"weather": weather(&calls)})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}, agent.Text("What is the weather in Paris?"))
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if calls.Load() != 1 || res.Steps != 2 {
		t.Fatalf("the tool ran %d times (%d steps), want once", calls.Load(), res.Steps)
	}
	if got := res.Output.Text(); got != "In Paris it is 18°C and sunny." {
		t.Fatalf("answer = %q", got)
	}
	usage, _ := res.Output.Metadata["usage"].(map[string]any)
	if usage["input_tokens"] != int64(472+568) || usage["output_tokens"] != int64(71+12) {
		t.Fatalf("usage = %v", res.Output.Metadata)
	}
	if res.Output.Metadata["stop_reason"] != "end_turn" {
		t.Fatalf("metadata = %v", res.Output.Metadata)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	first := reqs[0].Body
	sys, _ := first["system"].([]any)
	if first["model"] != "claude-sonnet-4-5" || first["stream"] != true || first["max_tokens"] != float64(llm.DefaultMaxTokens) ||
		len(sys) != 1 || sys[0].(map[string]any)["text"] != "You answer weather questions." {
		t.Fatalf("first request = %s", reqs[0].Raw)
	}
	defs := map[string]map[string]any{}
	for _, tl := range first["tools"].([]any) {
		defs[tl.(map[string]any)["name"].(string)] = tl.(map[string]any)
	}
	if schema, _ := defs["weather"]["input_schema"].(map[string]any); schema["type"] != "object" || schema["properties"].(map[string]any)["city"] == nil {
		t.Fatalf("weather tool = %v", defs["weather"])
	}
	if schema, _ := defs["shout"]["input_schema"].(map[string]any); schema["properties"].(map[string]any)["input"] == nil {
		t.Fatalf("shout tool = %v", defs["shout"])
	}

	msgs := reqs[1].Body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second messages = %v", msgs)
	}
	asst := msgs[1].(map[string]any)
	blocks := asst["content"].([]any)
	use := blocks[len(blocks)-1].(map[string]any)
	if asst["role"] != "assistant" || use["type"] != "tool_use" || use["id"] != "toolu_01A09q90qw90lq917835lq9" ||
		use["input"].(map[string]any)["city"] != "Paris" {
		t.Fatalf("assistant turn = %v", asst)
	}
	user := msgs[2].(map[string]any)
	result := user["content"].([]any)[0].(map[string]any)
	if user["role"] != "user" || result["type"] != "tool_result" || result["tool_use_id"] != "toolu_01A09q90qw90lq917835lq9" ||
		!strings.Contains(fmt.Sprint(result["content"]), "Paris: 18°C and sunny") || result["is_error"] == true {
		t.Fatalf("tool result turn = %v", user)
	}
	if s := fmt.Sprint(reqs[1].Body["system"]); strings.Contains(s, "18°C") || strings.Contains(s, "Current weather") {
		t.Fatalf("tool data reached the system prompt: %s", s)
	}
}

func TestAModelThatAlwaysUsesAToolStopsAtTheStepLimit(t *testing.T) {
	srv := llmtest.NewReplay(t, "/v1/messages", llmtest.Reply{File: "tool_use.sse"})
	var calls atomic.Int64
	g, err := topotest.Compile(t, registry(nil), assistant(srv, ", max_steps: 2"), map[string]agent.Agent{"weather": weather(&calls)})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}, agent.Text("weather?"))
	if res.Status != run.StatusLimitExceeded || !strings.Contains(res.Error, "the model still asked for tools after 2 rounds") {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if calls.Load() != 2 || len(srv.Requests()) != 3 {
		t.Fatalf("tool ran %d times over %d model calls; want 2 and 3", calls.Load(), len(srv.Requests()))
	}
}

func TestAnUnknownToolIsRefusedNeverRun(t *testing.T) {
	srv := llmtest.NewReplay(t, "/v1/messages", llmtest.Reply{File: "unknown_tool.sse"}, llmtest.Reply{File: "refusal_ack.sse"})
	var calls atomic.Int64
	g, err := topotest.Compile(t, registry(nil), assistant(srv, ""), map[string]agent.Agent{"weather": weather(&calls)})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}, agent.Text("tidy up"))
	if res.Status != run.StatusSucceeded || res.Output.Text() != "I can't run shell commands here." {
		t.Fatalf("status %s %q: %s", res.Status, res.Output.Text(), res.Error)
	}
	if calls.Load() != 0 || res.Steps != 1 || res.Output.Metadata["refused_tool_calls"] != 1 {
		t.Fatalf("weather calls %d, steps %d, metadata %v", calls.Load(), res.Steps, res.Output.Metadata)
	}
	msgs := srv.Requests()[1].Body["messages"].([]any)
	result := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	if result["tool_use_id"] != "toolu_01Bx7Yc3Vn9Qm2Lk5Jh8Gf4D" || result["is_error"] != true ||
		!strings.Contains(fmt.Sprint(result["content"]), `refused: there is no tool "run_shell"`) {
		t.Fatalf("refusal = %v", result)
	}
}

func TestUsageOverTheRunsTokenBudgetStopsTheRun(t *testing.T) {
	srv := llmtest.NewReplay(t, "/v1/messages", llmtest.Reply{File: "tool_use.sse"}, llmtest.Reply{File: "final_answer.sse"})
	var calls atomic.Int64
	g, err := topotest.Compile(t, registry(nil), assistant(srv, "")+"limits: {max_tokens: 500}\n", map[string]agent.Agent{"weather": weather(&calls)})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}, agent.Text("weather?"))
	if res.Status != run.StatusLimitExceeded || !strings.Contains(res.Error, "used 543 tokens") {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if len(srv.Requests()) != 1 || calls.Load() != 0 {
		t.Fatalf("after the budget was spent: %d model calls, %d tool calls", len(srv.Requests()), calls.Load())
	}
}

func TestTheAPIKeyReachesTheProviderOnlyNeverTheRunOrTheEnvironment(t *testing.T) {
	attacker := loopback.Listen(t)
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:"+attacker.Port())
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment-000000000000")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")

	srv := llmtest.NewReplay(t, "/v1/messages",
		llmtest.Reply{File: "final_answer.sse"}, llmtest.Reply{File: "authentication_error.json", Status: 401})
	g, err := topotest.Compile(t, registry(nil), assistant(srv, ""), map[string]agent.Agent{"weather": weather(new(atomic.Int64))})
	if err != nil {
		t.Fatal(err)
	}
	v := llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}
	res, events := llmtest.Run(t, g, v, agent.Text("hi"))
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	h := srv.Requests()[0].Header
	if h.Get("Authorization") != "Bearer "+apiKey || h.Get("X-Leak") != "" || h.Get("Traceparent") != "" {
		t.Fatalf("headers = %v", h)
	}
	if all := llmtest.Everything(t, res, events); strings.Contains(all, apiKey) || strings.Contains(all, "from-the-environment") {
		t.Fatalf("a key leaked into the run: %s", all)
	}

	res, events = llmtest.Run(t, g, v, agent.Text("again"))
	t.Logf("error: %s", res.Error)
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, "model API error: HTTP 401 Unauthorized (authentication_error)") {
		t.Fatalf("status %s: %q", res.Status, res.Error)
	}
	if all := llmtest.Everything(t, res, events); strings.Contains(all, apiKey) || strings.Contains(all, "invalid x-api-key") {
		t.Fatalf("the key or the provider's message leaked: %s", all)
	}
	if attacker.Conns.Load() != 0 {
		t.Fatal("ANTHROPIC_BASE_URL from the environment was used")
	}
}

func TestAnErrorEventMidStreamFailsTheNodeAsRetryable(t *testing.T) {
	srv := llmtest.NewReplay(t, "/v1/messages", llmtest.Reply{File: "overloaded_midstream.sse"}, llmtest.Reply{File: "final_answer.sse"})
	g, err := topotest.Compile(t, registry(nil), fmt.Sprintf(`
name: g
nodes:
  - name: n
    agent: anthropic:claude-sonnet-4-5
    with: {base_url: "%s"}
    secrets: [ANTHROPIC_API_KEY]
    allow_private: ["%s"]
    retry: {max: 1, backoff: 1ms}
`, srv.URL, srv.Private()), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}, agent.Text("hi"))
	if res.Status != run.StatusSucceeded || res.Trace[0].Attempts != 2 {
		t.Fatalf("status %s after %d attempts: %s", res.Status, res.Trace[0].Attempts, res.Error)
	}
}

func TestNonStreamingAnswer(t *testing.T) {
	srv := llmtest.NewReplay(t, "/v1/messages", llmtest.Reply{File: "summary.json"})
	g, err := topotest.Compile(t, registry(nil), fmt.Sprintf(`
name: g
nodes:
  - name: n
    agent: {llm: {provider: anthropic, model: claude-haiku-4-5, base_url: "%s", stream: false, max_tokens: 300, temperature: 0.2, api_key_secret: SUPPORT_ANTHROPIC_KEY}}
    secrets: [SUPPORT_ANTHROPIC_KEY]
    allow_private: ["%s"]
`, srv.URL, srv.Private()), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"SUPPORT_ANTHROPIC_KEY": apiKey}, agent.Text("I was charged twice."))
	if res.Status != run.StatusSucceeded || !strings.HasPrefix(res.Output.Text(), "Customer was charged twice") {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
	r := srv.Requests()[0]
	if _, streamed := r.Body["stream"]; streamed || r.Body["max_tokens"] != float64(300) || r.Body["temperature"] != 0.2 || r.Header.Get("Authorization") != "Bearer "+apiKey {
		t.Fatalf("request = %s", r.Raw)
	}
}

func TestEgressGuardRefusesEveryBlockedVectorAsABaseURL(t *testing.T) {
	ln := loopback.Listen(t)
	for _, v := range append(loopback.Vectors(t, "../testdata/ssrf-blocked.txt"), "http://127.0.0.1:"+ln.Port()) {
		_, err := topotest.Compile(t, registry(nil), fmt.Sprintf("name: g\nnodes:\n  - name: n\n    agent: {anthropic: {model: claude-sonnet-4-5, base_url: %q}}\n    secrets: [ANTHROPIC_API_KEY]\n", v), nil)
		if err == nil || !strings.Contains(err.Error(), "egress refused") {
			t.Errorf("%s: got %v, want an egress policy error", v, err)
		}
	}
	if ln.Conns.Load() != 0 {
		t.Fatalf("%d connections reached the listener", ln.Conns.Load())
	}
}

func TestEgressGuardRefusesAnAllowedNameThatResolvesToAMetadataAddress(t *testing.T) {
	opts := &llm.Options{Egress: &egress.Options{Resolver: loopback.StaticResolver{IP: net.ParseIP("169.254.169.254")}}}
	g, err := topotest.Compile(t, registry(opts), `
name: g
nodes:
  - name: n
    agent: anthropic:claude-sonnet-4-5
    secrets: [ANTHROPIC_API_KEY]
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := llmtest.Run(t, g, llmtest.Vault{"ANTHROPIC_API_KEY": apiKey}, agent.Text("hi"))
	if res.Status != run.StatusDenied || !strings.Contains(res.Error, "egress refused: 169.254.169.254 (api.anthropic.com)") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
}
