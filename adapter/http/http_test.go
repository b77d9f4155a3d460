package http_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/loopback"
	"github.com/babelagent/babel/run"
)

func jsonReply(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func TestPostSendsJSONInputAndReturnsADataPart(t *testing.T) {
	srv := newRecorder(t, jsonReply(`{"labels":["billing","urgent"]}`))
	g := mustCompile(t, fmt.Sprintf(`
name: classify
nodes:
  - name: labels
    agent: {http: {url: "%s/v1/labels", headers: {X-Team: support}}}
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)

	in, _ := agent.Data(map[string]any{"ticket": "my card was charged twice"})
	res := runGraph(t, g, nil, in)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	v, _ := res.Output.Any()
	labels, _ := v.(map[string]any)["labels"].([]any)
	if len(labels) != 2 || labels[0] != "billing" || res.Output.Parts[0].Kind != agent.PartData {
		t.Fatalf("output = %+v", res.Output)
	}
	if !res.Labels.Has(agent.Untrusted) {
		t.Fatalf("a peer's answer must be labelled untrusted, got %v", res.Labels)
	}
	hits := srv.Hits()
	if len(hits) != 1 {
		t.Fatalf("%d hits", len(hits))
	}
	h := hits[0]
	if h.Method != "POST" || h.Path != "/v1/labels" || h.ContentType != "application/json" ||
		h.Body != `{"ticket":"my card was charged twice"}` || h.Header.Get("X-Team") != "support" {
		t.Fatalf("request = %+v", h)
	}
}

func TestTextInputIsSentAsTextAndATextReplyIsText(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Thanks, we are on it.")
	})
	g := mustCompile(t, fmt.Sprintf(`
name: reply
nodes:
  - name: clean
    agent: builtin:trim
  - name: draft
    agent: {http: {url: "%s/draft"}}
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)

	res := runGraph(t, g, nil, agent.Text("   please refund me  "))
	if res.Status != run.StatusSucceeded || res.Output.Text() != "Thanks, we are on it." || res.Output.Parts[0].Kind != agent.PartText {
		t.Fatalf("got %s %+v (%s)", res.Status, res.Output, res.Error)
	}
	h := srv.Hits()[0]
	if h.Body != "please refund me" || !strings.HasPrefix(h.ContentType, "text/plain") {
		t.Fatalf("request = %+v", h)
	}
}

func TestGetPutsAFlatObjectInTheQueryString(t *testing.T) {
	srv := newRecorder(t, jsonReply(`{"n":2}`))
	g := mustCompile(t, fmt.Sprintf(`
name: search
nodes:
  - name: find
    agent: {http: {url: "%s/search?v=2", method: GET}}
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)

	in, _ := agent.Data(map[string]any{"q": "late delivery", "limit": 5, "open": true, "tag": []string{"a", "b"}, "skip": nil})
	res := runGraph(t, g, nil, in)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	h := srv.Hits()[0]
	got, _ := url.ParseQuery(h.Query)
	want := url.Values{"v": {"2"}, "q": {"late delivery"}, "limit": {"5"}, "open": {"true"}, "tag": {"a", "b"}}
	if h.Method != "GET" || h.Body != "" || got.Encode() != want.Encode() {
		t.Fatalf("GET %s?%s body %q", h.Path, h.Query, h.Body)
	}
}

func TestGetRefusesInputThatCannotBeAQueryStringBeforeSending(t *testing.T) {
	srv := newRecorder(t, jsonReply(`{}`))
	g := mustCompile(t, fmt.Sprintf(`
name: search
nodes:
  - name: find
    agent: {http: {url: "%s/search?v=2", method: GET}}
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)

	for _, tc := range []struct {
		in   string
		want string
	}{
		{`{"filter":{"a":1}}`, `field "filter": nested objects cannot go in a query string`},
		{`{"v":"1"}`, `field "v": this query parameter is fixed by the node's url`},
		{`[1,2]`, `needs a flat JSON object to build its query string, not an array`},
	} {
		res := runGraph(t, g, nil, agent.JSON([]byte(tc.in)))
		if res.Status != run.StatusFailed || !strings.Contains(res.Error, tc.want) {
			t.Errorf("input %s: got %s %q, want an error containing %q", tc.in, res.Status, res.Error, tc.want)
		}
	}
	res := runGraph(t, g, nil, agent.Text("free text"))
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, "needs a flat JSON object, not text") {
		t.Errorf("text input: got %s %q", res.Status, res.Error)
	}
	if n := len(srv.Hits()); n != 0 {
		t.Fatalf("bad input reached the server %d times", n)
	}
}

func TestBearerSecretReachesTheServerButNoOutputTraceOrError(t *testing.T) {
	const token = "tok-4f1c9e0b7a2d4c8e9f10a1b2"
	var fail bool
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if fail {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "invalid token "+r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"ok":true}`)
	})
	g := mustCompile(t, fmt.Sprintf(`
name: post
nodes:
  - name: post
    agent: {http: {url: "%s/api/reply", auth: {bearer: TICKETS_TOKEN}, headers: {X-Trace: "t-{{secret:TICKETS_TOKEN}}"}}}
    secrets: [TICKETS_TOKEN]
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)
	if c := g.Nodes[0].Card; len(c.Secrets) != 1 || strings.Contains(fmt.Sprint(c), token) {
		t.Fatalf("card = %+v", c)
	}

	v := vault{"TICKETS_TOKEN": token, "OTHER": "not-for-this-node"}
	res := runGraph(t, g, v, agent.Text("hello"))
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	h := srv.Hits()[0]
	if h.Auth != "Bearer "+token || h.Header.Get("X-Trace") != "t-"+token {
		t.Fatalf("server saw Authorization %q X-Trace %q", h.Auth, h.Header.Get("X-Trace"))
	}
	if out := resultJSON(t, res); strings.Contains(out, token) {
		t.Fatalf("the token leaked into the result: %s", out)
	}

	fail = true
	res, events := runGraphEvents(t, g, v, agent.Text("hello"))
	if res.Status != run.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	out := resultJSON(t, res) + events
	if strings.Contains(out, token) || strings.Contains(out, "invalid token") {
		t.Fatalf("the token or the peer's body leaked into the failed result: %s", out)
	}
	if !strings.Contains(res.Error, "HTTP 401 Unauthorized (status 401)") {
		t.Fatalf("error = %q", res.Error)
	}
}

func TestAMissingSecretIsAClearErrorAndNothingIsSent(t *testing.T) {
	srv := newRecorder(t, jsonReply(`{}`))
	g := mustCompile(t, fmt.Sprintf(`
name: post
nodes:
  - name: post
    agent: {http: {url: "%s/x", auth: {header: X-Api-Key, secret: API_KEY}}}
    secrets: [API_KEY]
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)
	res := runGraph(t, g, vault{}, agent.Text("x"))
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, "secret API_KEY was not given to this call") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	if len(srv.Hits()) != 0 {
		t.Fatal("a request went out without its credential")
	}
}

func TestPeerErrorsCarryTheStatusAndOnlyTransientOnesAreRetried(t *testing.T) {
	for _, tc := range []struct {
		status   int
		wantHits int
		retry    bool
	}{
		{http.StatusServiceUnavailable, 3, true},
		{http.StatusTooManyRequests, 3, true},
		{http.StatusNotFound, 1, false},
		{http.StatusBadRequest, 1, false},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "stack trace: secret internals")
			})
			g := mustCompile(t, fmt.Sprintf(`
name: p
nodes:
  - name: call
    agent: {http: {url: "%s/x"}}
    allow_private: ["%s"]
    retry: {max: 2, backoff: 1ms}
`, srv.URL, srv.private()), nil)
			res := runGraph(t, g, nil, agent.Text("x"))
			if res.Status != run.StatusFailed || len(srv.Hits()) != tc.wantHits {
				t.Fatalf("status %s after %d hits, want failed after %d", res.Status, len(srv.Hits()), tc.wantHits)
			}
			want := fmt.Sprintf("(status %d)", tc.status)
			if !strings.Contains(res.Error, want) || strings.Contains(res.Error, "secret internals") {
				t.Fatalf("error = %q", res.Error)
			}
		})
	}
}

func TestAnUndeclaredEffectIsRefusedBeforeSending(t *testing.T) {
	srv := newRecorder(t, jsonReply(`{}`))
	g := mustCompile(t, fmt.Sprintf(`
name: p
nodes:
  - name: post
    agent: {http: {url: "%s/x"}}
    effects: [read]
    allow_private: ["%s"]
`, srv.URL, srv.private()), nil)
	res := runGraph(t, g, nil, agent.Text("x"))
	// The kernel refuses the call before the agent runs; the agent would
	// refuse it too (agent.Permit), so either refusal is fine here.
	if res.Status == run.StatusSucceeded || !strings.Contains(res.Error, "effect egress") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	if len(srv.Hits()) != 0 {
		t.Fatal("the POST went out although the node declared only read")
	}
}

func TestCardDeclaresEffectsByMethod(t *testing.T) {
	for method, want := range map[string]string{"GET": "read", "": "egress,write", "DELETE": "egress,write", "put": "egress,write"} {
		a, err := httpadapter.New(&httpadapter.Config{URL: "https://api.example.com/v1/x?key=abc", Method: method}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := a.Card()
		if c.EffectList() != want || c.Kind != "http" || !c.ReadsOutside || len(c.Egress) != 1 || c.Egress[0] != "api.example.com" {
			t.Errorf("%s: card = %+v", method, c)
		}
		if strings.Contains(c.Name, "key=abc") {
			t.Errorf("the card shows the query string: %s", c.Name)
		}
	}
}

func TestConfigurationMistakesAreNamedAtCompileTime(t *testing.T) {
	for _, tc := range []struct{ agent, extra, want string }{
		{`{http: {url: "https://api.example.com/x", methd: GET}}`, "", `unknown setting "methd"`},
		{`{http: {url: "https://api.example.com/x", method: TRACE}}`, "", `method "TRACE" is not supported`},
		{`{http: {url: "https://api.example.com/x", auth: {bearer: API_TOKEN}}}`, "", `auth.bearer names secret API_TOKEN, which the node does not declare`},
		{`{http: {url: "https://api.example.com/x", headers: {Authorization: "{{secret:TOKEN}}"}}}`, "    secrets: [OTHER]\n", `names secret TOKEN, which the node does not declare`},
		{`{http: {url: "https://api.example.com/x", headers: {Host: evil.example}}}`, "", `Host is set by the transport`},
		{`{http: {url: "https://api.example.com/x", headers: {X-Api-Key: hunter2}}}`, "", `X-Api-Key must not hold a literal value`},
		{`{http: {url: "https://api.example.com/x", body: xml}}`, "", `body "xml": want auto, json or text`},
		{`{http: {method: GET}}`, "", `url is missing`},
		{`{http: {url: "https://api.example.com/x#frag"}}`, "", `has a fragment`},
		{`{http: {url: "https://other.example.com/x"}}`, "    egress: [api.example.com]\n", `egress refused: other.example.com: host not in allowlist`},
		{`{http: {url: 42}}`, "", `setting url: want string`},
	} {
		_, err := compile(t, "name: g\nnodes:\n  - name: n\n    agent: "+tc.agent+"\n"+tc.extra, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "n"`) {
			t.Errorf("%s: got %v, want an error naming node n and containing %q", tc.agent, err, tc.want)
		}
	}
}

func TestShortFormHTTPSURLIsAPost(t *testing.T) {
	var got hit
	srv := newTLSRecorder(t, func(w http.ResponseWriter, r *http.Request, body string) {
		got = hit{Method: r.Method, Path: r.URL.Path, Body: body}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `"accepted"`)
	})
	opts := &httpadapter.Options{Egress: &egress.Options{TLSConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()}}
	g := mustCompile(t, fmt.Sprintf(`
name: short
nodes:
  - name: post
    agent: %s/api/reply
    allow_private: ["%s"]
`, srv.URL, egress.AllowPrivateURL(srv.URL)), opts)
	res := runGraph(t, g, nil, agent.Text("hi"))
	if res.Status != run.StatusSucceeded || res.Output.Text() != "accepted" {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
	if got.Method != "POST" || got.Path != "/api/reply" || got.Body != "hi" {
		t.Fatalf("server saw %+v", got)
	}
	if c := g.Nodes[0].Card; c.EffectList() != "egress,write" {
		t.Fatalf("card %+v", c)
	}
}

func TestResponsesMapToPartsByContentType(t *testing.T) {
	for _, tc := range []struct {
		ctype, body string
		kind        agent.PartKind
		err         string
	}{
		{"application/problem+json", `{"a":1}`, agent.PartData, ""},
		{"application/json", `{"a":`, "", "response says application/json but is not valid JSON"},
		{"text/html", `<p>hi</p>`, agent.PartText, ""},
		{"image/png", "\x89PNG\r\n", agent.PartFile, ""},
		{"", `[1,2]`, agent.PartData, ""},
		{"", "plain words", agent.PartText, ""},
	} {
		srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = []string{tc.ctype}
			_, _ = io.WriteString(w, tc.body)
		})
		g := mustCompile(t, fmt.Sprintf("name: g\nnodes:\n  - name: n\n    agent: {http: {url: %q, method: GET}}\n    allow_private: [%q]\n", srv.URL, srv.private()), nil)
		res := runGraph(t, g, nil, agent.Text(""))
		switch {
		case tc.err != "":
			if res.Status != run.StatusFailed || !strings.Contains(res.Error, tc.err) {
				t.Errorf("%s: got %s %q", tc.ctype, res.Status, res.Error)
			}
		case res.Status != run.StatusSucceeded || res.Output.Parts[0].Kind != tc.kind:
			t.Errorf("%s %q: got %s %+v (%s)", tc.ctype, tc.body, res.Status, res.Output, res.Error)
		}
	}
}

func TestARedirectIsNotFollowed(t *testing.T) {
	inner := newRecorder(t, jsonReply(`{"secret":"internal"}`))
	outer := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/admin", http.StatusFound)
	})
	g := mustCompile(t, fmt.Sprintf("name: g\nnodes:\n  - name: n\n    agent: {http: {url: %q, method: GET}}\n    allow_private: [%q]\n", outer.URL, outer.private()), nil)
	res := runGraph(t, g, nil, agent.Text(""))
	if res.Status != run.StatusDenied || !strings.Contains(res.Error, "redirect not followed") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	if len(inner.Hits()) != 0 {
		t.Fatal("the redirect target was reached")
	}
}

func TestAResponseOverTheCapFails(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat("x", 10_000))
	})
	g := mustCompile(t, fmt.Sprintf("name: g\nnodes:\n  - name: n\n    agent: {http: {url: %q, method: GET}}\n    allow_private: [%q]\n", srv.URL, srv.private()),
		&httpadapter.Options{Egress: &egress.Options{MaxResponseBytes: 1000}})
	res := runGraph(t, g, nil, agent.Text(""))
	if res.Status != run.StatusFailed || !strings.Contains(res.Error, "exceeds the 1000-byte limit") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
}

// The egress guard: every shared SSRF vector is refused when the graph is
// compiled, whatever the node's allowlist says, and nothing is dialed.
func TestEgressGuardRefusesEveryBlockedVector(t *testing.T) {
	ln := loopback.Listen(t)
	vectors := append(loopback.Vectors(t, "testdata/ssrf-blocked.txt"), "http://127.0.0.1:"+ln.Port()+"/", "http://localhost:"+ln.Port()+"/")
	for _, v := range vectors {
		u, _ := url.Parse(v)
		allow := ""
		if h := u.Hostname(); h != "" && !strings.Contains(h, ":") {
			allow = fmt.Sprintf("    egress: [%q]\n", h) // the allowlist names the host: still refused
		}
		forms := []string{fmt.Sprintf("{http: {url: %q}}", v), fmt.Sprintf("{http: {url: %q, method: GET}}", v)}
		if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
			forms = append(forms, v) // the short form
		}
		for _, form := range forms {
			_, err := compile(t, "name: g\nnodes:\n  - name: n\n    agent: "+form+"\n"+allow, nil)
			if err == nil || !strings.Contains(err.Error(), "egress refused") {
				t.Errorf("%s: got %v, want an egress policy error", v, err)
			}
		}
	}
	if ln.Conns.Load() != 0 || ln.Bytes.Load() != 0 {
		t.Fatalf("%d connections and %d bytes reached the listener", ln.Conns.Load(), ln.Bytes.Load())
	}
}

// The check is made again on the address dialed: a name on the allowlist
// that resolves to loopback is refused at connect time.
func TestEgressGuardRefusesAnAllowedNameThatResolvesToLoopback(t *testing.T) {
	ln := loopback.Listen(t)
	opts := &httpadapter.Options{Egress: &egress.Options{Resolver: loopback.StaticResolver{IP: net.ParseIP("127.0.0.1")}}}
	g := mustCompile(t, fmt.Sprintf(`
name: g
nodes:
  - name: n
    agent: {http: {url: "http://api.partner.example:%s/v1"}}
    egress: [api.partner.example]
`, ln.Port()), opts)
	res := runGraph(t, g, nil, agent.Text("data"))
	if res.Status != run.StatusDenied || !strings.Contains(res.Error, "egress refused") || !strings.Contains(res.Error, "loopback") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	if ln.Conns.Load() != 0 {
		t.Fatalf("%d connections reached the listener", ln.Conns.Load())
	}
	if nodeTrace(res, "n").Attempts != 1 {
		t.Fatalf("an egress refusal must not be retried: %+v", nodeTrace(res, "n"))
	}
}

func TestALoopbackURLErrorSaysHowToOptIn(t *testing.T) {
	_, err := compile(t, "name: g\nnodes:\n  - name: n\n    agent: {http: {url: \"http://127.0.0.1:8080/x\"}}\n", nil)
	if err == nil || !strings.Contains(err.Error(), `add allow_private: ["127.0.0.1:8080"] to the node`) {
		t.Fatalf("got %v", err)
	}
}

func TestBuilderGraphWithAGoConstructedAgent(t *testing.T) {
	srv := newRecorder(t, jsonReply(`{"id":7}`))
	a, err := httpadapter.New(&httpadapter.Config{URL: srv.URL + "/items"}, &httpadapter.Options{Egress: &egress.Options{AllowPrivate: []string{srv.private()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g, err := graph.New("b").Add("create", a).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := agent.Data(map[string]string{"name": "x"})
	res := runGraph(t, g, nil, in)
	if res.Status != run.StatusSucceeded || res.Output.Text() != `{"id":7}` {
		t.Fatalf("got %s %q (%s)", res.Status, res.Output.Text(), res.Error)
	}
}

// newTLSRecorder is an https server on loopback; h gets the request body.
func newTLSRecorder(t testing.TB, h func(http.ResponseWriter, *http.Request, string)) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h(w, r, string(b))
	}))
	t.Cleanup(srv.Close)
	return srv
}
