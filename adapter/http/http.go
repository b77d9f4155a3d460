package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
)

// Config is an HTTP agent: the map under `http:` in a topology.
type Config struct {
	// URL is the endpoint, http or https.
	URL string `json:"url"`
	// Method is POST (the default), GET, PUT, PATCH or DELETE.
	Method string `json:"method,omitempty"`
	// Headers are sent with every request. A value may hold
	// {{secret:NAME}} references to secrets the node declares.
	Headers map[string]string `json:"headers,omitempty"`
	// Auth names the secret that authenticates the request.
	Auth *Auth `json:"auth,omitempty"`
	// Body says how POST, PUT and PATCH encode the input: "auto" (the
	// default: a text message as text/plain, anything else as JSON), "json"
	// or "text".
	Body string `json:"body,omitempty"`
	// Description is shown in the card (and to a model calling the agent as
	// a tool).
	Description string `json:"description,omitempty"`
}

// Options configures the agents this package builds. Nil means the defaults.
type Options struct {
	// Egress is the template of every agent's guarded client: timeouts,
	// body cap, resolver, TLS roots, proxy. Its Allowlist and AllowPrivate
	// apply to agents built with New; agents built from a topology take the
	// node's declarations (see Egress).
	Egress *egress.Options
}

// Agent calls one HTTP endpoint. It is safe for concurrent use.
type Agent struct {
	method  string
	u       *url.URL
	body    string
	client  *egress.Client
	headers *Headers
	peer    string
	card    agent.Card
}

var _ agent.Agent = (*Agent)(nil)

// New returns an agent calling cfg.URL. Its egress allowlist is
// opts.Egress.Allowlist, or the URL's host when that is empty.
func New(cfg *Config, opts *Options) (*Agent, error) {
	if cfg == nil {
		return nil, fmt.Errorf("http: no configuration")
	}
	if opts == nil {
		opts = &Options{}
	}
	return build(*cfg, opts, nil)
}

func build(cfg Config, opts *Options, node *graph.NodeSpec) (*Agent, error) {
	method := strings.ToUpper(strings.TrimSpace(cfg.Method))
	var effects []agent.Effect
	switch method {
	case "":
		method = http.MethodPost
		effects = []agent.Effect{agent.EffectEgress, agent.EffectWrite}
	case http.MethodGet:
		effects = []agent.Effect{agent.EffectRead}
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		effects = []agent.Effect{agent.EffectEgress, agent.EffectWrite}
	default:
		return nil, fmt.Errorf("method %q is not supported (want GET, POST, PUT, PATCH or DELETE)", cfg.Method)
	}
	switch cfg.Body {
	case "", "auto", "json", "text":
	default:
		return nil, fmt.Errorf("body %q: want auto, json or text", cfg.Body)
	}
	u, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	var declared []string
	if node != nil {
		declared = node.Secrets
		if declared == nil {
			declared = []string{}
		}
	}
	hdrs, err := NewHeaders(cfg.Headers, cfg.Auth, declared)
	if err != nil {
		return nil, err
	}
	client, allow, err := Egress(opts.Egress, node, u.String())
	if err != nil {
		return nil, err
	}
	shown := Redacted(u)
	return &Agent{
		method: method, u: u, body: cfg.Body, client: client, headers: hdrs,
		peer: "http " + u.Host,
		card: agent.Card{
			Name: "http " + method + " " + shown, Description: cfg.Description, Kind: "http",
			Secrets: hdrs.Secrets(), Egress: allow, Effects: effects, ReadsOutside: true,
		},
	}, nil
}

// ParseURL parses raw, refusing credentials and fragments in it. Its
// scheme and host are left to the egress guard, which refuses anything but
// http and https to an allowed, public host.
func ParseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, fmt.Errorf("url is missing")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url is malformed: %s", strings.TrimPrefix(errText(err), "parse "))
	}
	switch {
	case u.User != nil:
		return nil, fmt.Errorf("url %s carries credentials: name a secret under secrets: and use auth:", Redacted(u))
	case u.Fragment != "":
		return nil, fmt.Errorf("url %s has a fragment, which is never sent", Redacted(u))
	}
	return u, nil
}

// errText is a url.Parse error without the URL it quotes, which may hold
// credentials.
func errText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return "invalid url"
}

// Redacted renders u without userinfo, query or fragment: what may appear
// in a card, a trace or an error.
func Redacted(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	return v.String()
}

// Card describes the agent: kind http, reads from outside, and its effect
// (read for GET, egress and write otherwise).
func (a *Agent) Card() agent.Card { return a.card }

// Close releases the agent's idle connections.
func (a *Agent) Close() error { a.client.CloseIdleConnections(); return nil }

// Run sends the input to the endpoint and returns its response.
func (a *Agent) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	for _, e := range a.card.Effects {
		if err := agent.Permit(ctx, e); err != nil {
			return agent.Message{}, err
		}
	}
	req, err := a.request(ctx, in)
	if err != nil {
		return agent.Message{}, err
	}
	if err := a.headers.Apply(ctx, req.Header); err != nil {
		return agent.Message{}, fmt.Errorf("%s: %w", a.peer, err)
	}
	return Exchange(a.client, a.peer, req)
}

func (a *Agent) request(ctx context.Context, in agent.Message) (*http.Request, error) {
	u := *a.u
	var body []byte
	var ctype string
	switch a.method {
	case http.MethodGet, http.MethodDelete:
		q, err := Query(a.card.Name, in, u.Query())
		if err != nil {
			return nil, err
		}
		if q != nil {
			u.RawQuery = q.Encode()
		}
	default:
		var err error
		body, ctype, err = encodeBody(a.card.Name, a.body, in)
		if err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, a.method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.peer, err)
	}
	if body == nil {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	} else {
		req.Header.Set("Content-Type", ctype)
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	return req, nil
}

func encodeBody(name, mode string, in agent.Message) ([]byte, string, error) {
	textIn := len(in.Parts) == 1 && in.Parts[0].Kind == agent.PartText
	if mode == "text" || (mode != "json" && textIn) {
		return []byte(in.Text()), "text/plain; charset=utf-8", nil
	}
	raw, err := in.Value()
	if err == agent.ErrNoValue {
		raw = json.RawMessage("null")
	} else if err != nil {
		return nil, "", &agent.InputError{Agent: name, Reason: err.Error()}
	}
	if !json.Valid(raw) {
		return nil, "", &agent.InputError{Agent: name, Reason: "the input is not valid JSON"}
	}
	return raw, "application/json", nil
}

// Query turns a flat JSON object message into query parameters added to
// fixed (the URL's own, which the input may not override): strings,
// numbers and booleans become one value each, arrays of them repeat the
// key, null is left out. An empty message or empty text gives nil; other
// text, nested objects and a fixed key are *agent.InputError naming the
// problem.
func Query(name string, in agent.Message, fixed url.Values) (url.Values, error) {
	if len(in.Parts) == 0 {
		return nil, nil
	}
	if len(in.Parts) == 1 && in.Parts[0].Kind == agent.PartText {
		if strings.TrimSpace(in.Parts[0].Text) == "" {
			return nil, nil
		}
		return nil, &agent.InputError{Agent: name, Reason: "a GET or DELETE sends its input as a query string, so it needs a flat JSON object, not text"}
	}
	raw, err := in.Value()
	if err != nil {
		return nil, &agent.InputError{Agent: name, Reason: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &agent.InputError{Agent: name, Reason: "the input is not valid JSON"}
	}
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &agent.InputError{Agent: name, Reason: fmt.Sprintf("a GET or DELETE needs a flat JSON object to build its query string, not %s", jsonKind(v))}
	}
	q := url.Values{}
	for k, vs := range fixed {
		q[k] = append([]string(nil), vs...)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := fixed[k]; ok {
			return nil, &agent.InputError{Agent: name, Field: k, Reason: "this query parameter is fixed by the node's url"}
		}
		switch x := obj[k].(type) {
		case nil:
		case []any:
			for _, e := range x {
				s, ok := Scalar(e)
				if !ok {
					return nil, &agent.InputError{Agent: name, Field: k, Reason: "arrays in a query string may hold only strings, numbers and booleans"}
				}
				q.Add(k, s)
			}
		default:
			s, ok := Scalar(x)
			if !ok {
				return nil, &agent.InputError{Agent: name, Field: k, Reason: "nested objects cannot go in a query string"}
			}
			q.Add(k, s)
		}
	}
	return q, nil
}

// Scalar renders a JSON string, number or boolean as query-string text; it
// reports false for anything else.
func Scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "this value"
}
