package openapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
	"github.com/babelagent/babel/internal/topotest"

	"github.com/babelagent/babel/adapter/openapi"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/loopback"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/secrets"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }

// api is a real HTTP server on loopback serving an OpenAPI document at
// /openapi.yaml and the API it describes under /v1/, counting the API's hits.
type api struct {
	*httptest.Server
	doc  []byte
	mu   sync.Mutex
	hits []*http.Request
	body []string
}

func newAPI(t testing.TB, doc []byte) *api {
	t.Helper()
	a := &api{doc: doc}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.yaml" || r.URL.Path == "/openapi.json" {
			_, _ = w.Write(a.doc)
			return
		}
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.hits = append(a.hits, r.Clone(context.Background()))
		a.body = append(a.body, string(b))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/tickets":
			var nt map[string]any
			_ = json.Unmarshal(b, &nt)
			nt["id"] = 17
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(nt)
		case r.Method == "GET" && r.URL.Path == "/v1/tickets":
			_, _ = io.WriteString(w, `[{"id":1,"title":"Charged twice","priority":2}]`)
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/tickets/"):
			_, _ = fmt.Fprintf(w, `{"id":%s,"title":"Charged twice","priority":2}`, strings.TrimPrefix(r.URL.Path, "/v1/tickets/"))
		case r.Method == "DELETE":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/v2/tickets/"):
			_, _ = io.WriteString(w, `{"ok":true}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *api) Hits() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.hits)
}

func (a *api) last() (*http.Request, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hits[len(a.hits)-1], a.body[len(a.body)-1]
}

func (a *api) private() string { return egress.AllowPrivateURL(a.URL) }

func readDoc(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

type vault map[string]string

func (v vault) Scope(_ context.Context, names []string) (*agent.Secrets, error) {
	var ss []secrets.Secret
	for _, n := range names {
		if val, ok := v[n]; ok {
			ss = append(ss, secrets.New(n, val))
		}
	}
	return agent.NewSecrets(ss...), nil
}

func compile(t testing.TB, topology string, opts *openapi.Options) (*graph.Graph, error) {
	t.Helper()
	r := graph.NewRegistry()
	openapi.Register(r, opts)
	return topotest.Compile(t, r, topology, nil)
}

func mustCompile(t testing.TB, topology string, opts *openapi.Options) *graph.Graph {
	t.Helper()
	g, err := compile(t, topology, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return g
}

func runGraph(t testing.TB, g *graph.Graph, v vault, in string) *run.Result {
	t.Helper()
	r, err := run.NewRunner(&run.Config{Kernel: kernel.New(&kernel.Options{Secrets: v})})
	if err != nil {
		t.Fatal(err)
	}
	msg := agent.Text(in)
	if in != "" {
		msg = agent.JSON(json.RawMessage(in))
	}
	return r.Run(context.Background(), &run.Request{Graph: g, Input: msg})
}

// node is a one-node topology calling operation op of the api's document.
func (a *api) node(op, extra string) string {
	return fmt.Sprintf(`
name: tickets
nodes:
  - name: call
    agent: {openapi: {spec: "%s/openapi.yaml", operation: %s, digest: "%s"%s}}
    allow_private: ["%s"]
`, a.URL, op, digest(a.doc), extra, a.private())
}

func TestValidArgumentsReachTheOperation(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	g := mustCompile(t, a.node("createTicket", ""), nil)
	res := runGraph(t, g, nil, `{"dry_run": false, "body": {"title": "Charged twice", "priority": 2, "email": null}}`)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	v, _ := res.Output.Any()
	if m, _ := v.(map[string]any); m["id"] != float64(17) || m["title"] != "Charged twice" {
		t.Fatalf("output = %v", v)
	}
	req, body := a.last()
	if a.Hits() != 1 || req.Method != "POST" || req.URL.Path != "/v1/tickets" || req.URL.RawQuery != "dry_run=false" ||
		req.Header.Get("Content-Type") != "application/json" || body != `{"title": "Charged twice", "priority": 2, "email": null}` {
		t.Fatalf("%d hits; last %s %s?%s %q", a.Hits(), req.Method, req.URL.Path, req.URL.RawQuery, body)
	}
	c := g.Nodes[0].Card
	if c.Kind != "openapi" || c.Name != "openapi createTicket" || c.Description != "Open a support ticket." ||
		c.EffectList() != "egress,write" || !c.ReadsOutside || c.Egress[0] != "127.0.0.1" {
		t.Fatalf("card = %+v", c)
	}
	var schema map[string]any
	if err := json.Unmarshal(c.InputSchema, &schema); err != nil || schema["additionalProperties"] != false ||
		fmt.Sprint(schema["required"]) != "[body]" {
		t.Fatalf("input schema = %s", c.InputSchema)
	}
}

func TestInvalidArgumentsNeverReachTheOperation(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	create := mustCompile(t, a.node("createTicket", ""), nil)
	list := mustCompile(t, a.node("listTickets", ""), nil)
	get := mustCompile(t, a.node("getTicket", ""), nil)
	for _, tc := range []struct {
		g        *graph.Graph
		in, want string
	}{
		{create, `{}`, "body"},
		{create, `{"body": {"title": "Hi", "priority": 2}}`, "title"},
		{create, `{"body": {"title": "Charged twice", "priority": 9}}`, "priority"},
		{create, `{"body": {"title": "Charged twice", "priority": 2, "admin": true}}`, "admin"},
		{create, `{"body": {"title": "Charged twice", "priority": 2}, "force": true}`, "force"},
		{create, `{"dry_run": "yes", "body": {"title": "Charged twice", "priority": 2}}`, "dry_run"},
		{create, `{"body": {"title": "Charged twice", "priority": 2, "tags": ["a","b","c","d","e","f"]}}`, "tags"},
		{create, `"free text"`, "want object"},
		{list, `{"limit": 1000}`, "limit"},
		{list, `{"status": "archived"}`, "status"},
		{list, `{"tag": [["nested"]]}`, "tag"},
		{get, `{"id": 0}`, "id"},
		{get, `{"id": 7, "X-Request-Id": "` + strings.Repeat("x", 65) + `"}`, "X-Request-Id"},
		{get, `{}`, "id"},
	} {
		res := runGraph(t, tc.g, nil, tc.in)
		t.Logf("%s %s: %s", tc.g.Nodes[0].Card.Name, tc.in, res.Error)
		if res.Status == run.StatusSucceeded || !strings.Contains(res.Error, tc.want) {
			t.Errorf("%s %s: got %s %q, want an error naming %q", tc.g.Nodes[0].Card.Name, tc.in, res.Status, res.Error, tc.want)
		}
	}
	if n := a.Hits(); n != 0 {
		t.Fatalf("%d invalid calls reached the operation", n)
	}
}

func TestTheAgentChecksTheRequestAgainstTheDocumentItself(t *testing.T) {
	// Called directly (not through a graph, which checks the card's schema
	// first), the agent still refuses what the document refuses.
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	ag, err := openapi.New(&openapi.Config{Spec: a.URL + "/openapi.yaml", Operation: "createTicket", Digest: digest(a.doc)},
		&openapi.Options{Egress: &egress.Options{AllowPrivate: []string{a.private()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	k := kernel.New(nil)
	n := &graph.Node{Name: "call", Agent: ag, Card: ag.Card()} // no compiled input schema: the agent alone decides
	for _, in := range []string{
		`{"body": {"title": "Hi", "priority": 2}}`,
		`{"body": {"title": "Charged twice", "priority": 2, "admin": true}}`,
		`{"dry_run": "maybe", "body": {"title": "Charged twice", "priority": 2}}`,
	} {
		_, err := k.Invoke(context.Background(), &kernel.Call{Run: &kernel.Run{ID: "r", Budget: kernel.NewBudget(0, 0)}, Node: n, Input: agent.JSON([]byte(in)), Attempt: 1})
		t.Logf("%s: %v", in, err)
		if err == nil || !strings.Contains(err.Error(), "the request does not match the document") {
			t.Errorf("%s: got %v", in, err)
		}
	}
	if a.Hits() != 0 {
		t.Fatalf("%d invalid calls reached the operation", a.Hits())
	}
}

func TestPathQueryAndHeaderParametersAreSent(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	get := mustCompile(t, a.node("getTicket", ""), nil)
	res := runGraph(t, get, nil, `{"id": 7, "X-Request-Id": "req-42"}`)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	req, _ := a.last()
	if req.Method != "GET" || req.URL.Path != "/v1/tickets/7" || req.Header.Get("X-Request-Id") != "req-42" {
		t.Fatalf("request %s %s %v", req.Method, req.URL, req.Header)
	}
	if c := get.Nodes[0].Card; c.EffectList() != "read" {
		t.Fatalf("a GET operation declares %s", c.EffectList())
	}

	list := mustCompile(t, a.node("listTickets", ""), nil)
	res = runGraph(t, list, nil, `{"status": "open", "limit": 10, "tag": ["billing", "vip"]}`)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	req, _ = a.last()
	if q := req.URL.Query(); q.Get("status") != "open" || q.Get("limit") != "10" || strings.Join(q["tag"], ",") != "billing,vip" {
		t.Fatalf("query %s", req.URL.RawQuery)
	}

	del := mustCompile(t, a.node("deleteTicket", ""), nil)
	res = runGraph(t, del, nil, `{"id": 3}`)
	if res.Status != run.StatusSucceeded || res.Output.Text() != "" {
		t.Fatalf("status %s %q: %s", res.Status, res.Output.Text(), res.Error)
	}
	if c := del.Nodes[0].Card; c.EffectList() != "egress,write" {
		t.Fatalf("a DELETE declares %s", c.EffectList())
	}
}

func TestAFetchedDocumentMustBePinned(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	_, err := compile(t, fmt.Sprintf("name: t\nnodes:\n  - name: call\n    agent: {openapi: {spec: %q, operation: createTicket}}\n    allow_private: [%q]\n",
		a.URL+"/openapi.yaml", a.private()), nil)
	want := fmt.Sprintf("must be pinned: add digest: %q", digest(a.doc))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestAChangedDocumentIsRefused(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	topo := a.node("createTicket", "")
	a.doc = append(append([]byte{}, a.doc...), []byte("\nx-changed: true\n")...) // the server now serves another document
	_, err := compile(t, topo, nil)
	if err == nil || !strings.Contains(err.Error(), "digest mismatch") || !strings.Contains(err.Error(), digest(a.doc)) {
		t.Fatalf("got %v", err)
	}
	_, err = compile(t, strings.Replace(topo, "sha256:", "sha1:", 1), nil)
	if err == nil || !strings.Contains(err.Error(), "want sha256: followed by 64 hex digits") {
		t.Fatalf("malformed digest: got %v", err)
	}
}

func TestALocalDocumentWithARelativeServerNeedsServer(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	opts := &openapi.Options{Dir: "testdata"}
	_, err := compile(t, "name: t\nnodes:\n  - name: call\n    agent: {openapi: {spec: tickets.yaml, operation: listTickets}}\n", opts)
	if err == nil || !strings.Contains(err.Error(), `server url "/v1" is relative and the document is a local file: set server:`) {
		t.Fatalf("got %v", err)
	}
	g := mustCompile(t, fmt.Sprintf("name: t\nnodes:\n  - name: call\n    agent: {openapi: {spec: tickets.yaml, operation: listTickets, server: %q}}\n    allow_private: [%q]\n",
		a.URL+"/v1", a.private()), opts)
	res := runGraph(t, g, nil, `{"limit": 5}`)
	if res.Status != run.StatusSucceeded || a.Hits() != 1 {
		t.Fatalf("status %s after %d hits: %s", res.Status, a.Hits(), res.Error)
	}
}

func TestAnOpenAPI31Document(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets31.json"))
	g := mustCompile(t, fmt.Sprintf(`
name: notes
nodes:
  - name: note
    agent: {openapi: {spec: "%s/openapi.json", operation: addNote, digest: "%s", server: "%s"}}
    allow_private: ["%s"]
`, a.URL, digest(a.doc), a.URL, a.private()), nil)
	res := runGraph(t, g, nil, `{"id": 5, "body": {"text": "called back", "visibility": null}}`)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if req, _ := a.last(); req.URL.Path != "/v2/tickets/5/notes" {
		t.Fatalf("path %s", req.URL.Path)
	}
	for _, bad := range []string{`{"id": 0, "body": {"text": "x"}}`, `{"id": 5, "body": {"text": "x", "visibility": "everyone"}}`} {
		if res := runGraph(t, g, nil, bad); res.Status == run.StatusSucceeded {
			t.Errorf("%s was accepted", bad)
		}
	}
	if a.Hits() != 1 {
		t.Fatalf("%d hits", a.Hits())
	}
}

func TestBearerAuthComesFromADeclaredSecret(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	const token = "tkt-0c9e8d7f6a5b4c3d2e1f"
	g := mustCompile(t, a.node("getTicket", ", auth: {bearer: TICKETS_TOKEN}")+"    secrets: [TICKETS_TOKEN]\n", nil)
	res := runGraph(t, g, vault{"TICKETS_TOKEN": token}, `{"id": 1}`)
	if res.Status != run.StatusSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if req, _ := a.last(); req.Header.Get("Authorization") != "Bearer "+token {
		t.Fatalf("Authorization = %q", req.Header.Get("Authorization"))
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), token) {
		t.Fatal("the token leaked into the result")
	}
	_, err := compile(t, a.node("getTicket", ", auth: {bearer: TICKETS_TOKEN}"), nil)
	if err == nil || !strings.Contains(err.Error(), "names secret TICKETS_TOKEN, which the node does not declare") {
		t.Fatalf("undeclared secret: got %v", err)
	}
}

func TestDocumentMistakesAreNamedAtCompileTime(t *testing.T) {
	a := newAPI(t, readDoc(t, "tickets.yaml"))
	for _, tc := range []struct{ doc, op, want string }{
		{"", "closeTicket", `has no operation "closeTicket" (it has: createTicket, deleteTicket, getTicket, listTickets, ticketOptions)`},
		{"", "ticketOptions", "operation ticketOptions is a OPTIONS; only GET, POST, PUT, PATCH and DELETE are supported"},
		{"", "", "operation is missing"},
		{`{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {}}`, "x", "Swagger 2.0 document must be converted to OpenAPI 3"},
		{"openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /x:\n    get:\n      operationId: x\n      responses:\n        '200':\n          description: ok\n          content:\n            application/json:\n              schema: {$ref: 'http://169.254.169.254/latest/schema.json'}\n", "x", "refused"},
		{"openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /x:\n    post:\n      operationId: up\n      requestBody:\n        content:\n          multipart/form-data:\n            schema: {type: object}\n      responses:\n        '200': {description: ok}\n", "up", "only JSON bodies are supported"},
		{"not: [an, openapi", "x", "spec"},
	} {
		if tc.doc != "" {
			a.doc = []byte(tc.doc)
		} else {
			a.doc = readDoc(t, "tickets.yaml")
		}
		_, err := compile(t, a.node(tc.op, ""), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "call"`) {
			t.Errorf("op %q: got %v, want %q", tc.op, err, tc.want)
		}
	}
	if a.Hits() != 0 {
		t.Fatal("a broken document led to a request")
	}
}

// The egress guard: a document or a server URL that is one of the shared
// SSRF vectors is refused when the graph is compiled, and nothing is dialed.
func TestEgressGuardRefusesEveryBlockedVector(t *testing.T) {
	ln := loopback.Listen(t)
	a := newAPI(t, nil)
	vectors := append(loopback.Vectors(t, "testdata/ssrf-blocked.txt"), "http://127.0.0.1:"+ln.Port()+"/v1")
	for _, v := range vectors {
		// As the document's own server URL.
		a.doc = []byte(fmt.Sprintf("openapi: 3.0.3\ninfo: {title: x, version: '1'}\nservers: [{url: %q}]\npaths:\n  /x:\n    get:\n      operationId: x\n      responses: {'200': {description: ok}}\n", v))
		if _, err := compile(t, a.node("x", ""), nil); err == nil || !strings.Contains(err.Error(), "egress refused") {
			t.Errorf("server %s: got %v", v, err)
		}
		// As the document's URL.
		_, err := compile(t, fmt.Sprintf("name: t\nnodes:\n  - name: call\n    agent: {openapi: {spec: %q, operation: x, digest: %q}}\n", v, digest(a.doc)), nil)
		if err == nil || !strings.Contains(err.Error(), "egress refused") {
			t.Errorf("spec %s: got %v", v, err)
		}
	}
	if ln.Conns.Load() != 0 || a.Hits() != 0 {
		t.Fatalf("%d connections reached the listener, %d the api", ln.Conns.Load(), a.Hits())
	}
}

// The address dialed is checked again: the document's server is an allowed
// name that resolves to a loopback port nobody opted in.
func TestEgressGuardRefusesAServerNameThatResolvesToLoopback(t *testing.T) {
	ln := loopback.Listen(t)
	a := newAPI(t, []byte(fmt.Sprintf("openapi: 3.0.3\ninfo: {title: x, version: '1'}\nservers: [{url: 'http://api.tickets.example:%s/v1'}]\npaths:\n  /x:\n    get:\n      operationId: x\n      responses: {'200': {description: ok}}\n", ln.Port())))
	opts := &openapi.Options{Egress: &egress.Options{Resolver: loopback.StaticResolver{IP: net.ParseIP("127.0.0.1")}}}
	g := mustCompile(t, a.node("x", "")+"    egress: [api.tickets.example]\n", opts)
	res := runGraph(t, g, nil, "{}")
	if res.Status != run.StatusDenied || !strings.Contains(res.Error, "egress refused") || !strings.Contains(res.Error, "loopback") {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	if ln.Conns.Load() != 0 {
		t.Fatalf("%d connections reached the listener", ln.Conns.Load())
	}
}
