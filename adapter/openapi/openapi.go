package openapi

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
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
)

// Config is an OpenAPI agent: the map under `openapi:` in a topology.
type Config struct {
	// Spec is the document: a file path or an https URL.
	Spec string `json:"spec"`
	// Operation is the operationId of the operation the agent calls.
	Operation string `json:"operation"`
	// Digest pins the document ("sha256:" and 64 hex digits); required for
	// a document fetched over the network.
	Digest string `json:"digest,omitempty"`
	// Server replaces the document's server URL.
	Server string `json:"server,omitempty"`
	// Headers are sent with every request ({{secret:NAME}} allowed).
	Headers map[string]string `json:"headers,omitempty"`
	// Auth names the secret that authenticates the request.
	Auth *httpadapter.Auth `json:"auth,omitempty"`
}

// Defaults of Options.
const (
	DefaultFetchTimeout = 10 * time.Second
	DefaultMaxSpecBytes = 8 << 20
)

// Options configures the agents this package builds. Nil means the defaults.
type Options struct {
	// Egress is the template of every agent's guarded client (see
	// http.Egress). Its Allowlist and AllowPrivate apply to agents built
	// with New; agents built from a topology take the node's declarations.
	Egress *egress.Options
	// Dir is where a relative spec path is resolved (the topology file's
	// directory); empty means the process's working directory.
	Dir string
	// FetchTimeout bounds fetching a remote document (default 10s).
	FetchTimeout time.Duration
	// MaxSpecBytes caps a document (default 8 MiB).
	MaxSpecBytes int64
}

// Agent calls one operation. It is safe for concurrent use.
type Agent struct {
	route    *routers.Route
	method   string
	base     string // server URL without a trailing slash
	params   []param
	body     *openapi3.RequestBody
	bodyType string
	client   *egress.Client
	headers  *httpadapter.Headers
	peer     string
	card     agent.Card
}

var _ agent.Agent = (*Agent)(nil)

type param struct {
	name, in, style string
	explode         bool
}

// bodyKey is the input field holding the request body.
const bodyKey = "body"

// New returns an agent calling cfg.Operation of cfg.Spec. Its egress
// allowlist is opts.Egress.Allowlist, or the hosts of the document's URL
// and of its server when that is empty.
func New(cfg *Config, opts *Options) (*Agent, error) {
	if cfg == nil {
		return nil, errors.New("openapi: no configuration")
	}
	if opts == nil {
		opts = &Options{}
	}
	return build(*cfg, opts, nil)
}

func build(cfg Config, opts *Options, node *graph.NodeSpec) (*Agent, error) {
	data, specURL, name, err := readSpec(&cfg, opts, node)
	if err != nil {
		return nil, err
	}
	if err := checkDigest(name, cfg.Digest, data, specURL != nil); err != nil {
		return nil, err
	}
	doc, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	path, method, item, op, err := operation(doc, name, cfg.Operation)
	if err != nil {
		return nil, err
	}
	var effects []agent.Effect
	switch method {
	case http.MethodGet:
		effects = []agent.Effect{agent.EffectRead}
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		effects = []agent.Effect{agent.EffectEgress, agent.EffectWrite}
	default:
		return nil, fmt.Errorf("operation %s is a %s; only GET, POST, PUT, PATCH and DELETE are supported", cfg.Operation, method)
	}
	base, err := serverURL(&cfg, doc, item, op, specURL)
	if err != nil {
		return nil, fmt.Errorf("operation %s: %w", cfg.Operation, err)
	}
	bu, err := httpadapter.ParseURL(base)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if bu.RawQuery != "" {
		return nil, fmt.Errorf("server %s: a query string is not supported", httpadapter.Redacted(bu))
	}
	var declared []string
	if node != nil {
		declared = node.Secrets
		if declared == nil {
			declared = []string{}
		}
	}
	hdrs, err := httpadapter.NewHeaders(cfg.Headers, cfg.Auth, declared)
	if err != nil {
		return nil, err
	}
	client, allow, err := httpadapter.Egress(opts.Egress, node, base)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", httpadapter.Redacted(bu), err)
	}
	a := &Agent{
		route:  &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op},
		method: method, base: base, client: client, headers: hdrs, peer: "openapi " + bu.Host,
	}
	schema, err := a.inputs(doc, item, op)
	if err != nil {
		client.CloseIdleConnections()
		return nil, fmt.Errorf("operation %s: %w", cfg.Operation, err)
	}
	desc := op.Summary
	if desc == "" {
		desc = op.Description
	}
	if len(desc) > 1024 {
		desc = desc[:1024]
	}
	a.card = agent.Card{
		Name: "openapi " + cfg.Operation, Description: desc, Kind: "openapi", InputSchema: schema,
		Secrets: hdrs.Secrets(), Egress: allow, Effects: effects, ReadsOutside: true,
	}
	return a, nil
}

// inputs collects the operation's parameters and body, and returns the
// input schema: an object of the parameters by name and the body under
// "body", nothing else.
func (a *Agent) inputs(doc *openapi3.T, item *openapi3.PathItem, op *openapi3.Operation) (json.RawMessage, error) {
	c := &converter{doc: doc, oas30: doc.IsOpenAPI30()}
	props := map[string]any{}
	var required []string
	seen := map[string]string{}
	add := func(p *openapi3.Parameter) error {
		switch p.In {
		case openapi3.ParameterInHeader:
			switch http.CanonicalHeaderKey(p.Name) {
			case "Accept", "Content-Type", "Authorization": // ignored by OpenAPI: set by the transport or auth:
				return nil
			}
		case openapi3.ParameterInPath, openapi3.ParameterInQuery, openapi3.ParameterInCookie:
		default:
			return fmt.Errorf("parameter %q: location %q is not supported", p.Name, p.In)
		}
		if in, dup := seen[p.Name]; dup {
			return fmt.Errorf("parameter %q is both in %s and in %s; the input cannot tell them apart", p.Name, in, p.In)
		}
		if p.Name == bodyKey {
			return fmt.Errorf("a parameter is named %q, which the input reserves for the request body", bodyKey)
		}
		seen[p.Name] = p.In
		s := map[string]any{}
		if p.Schema != nil {
			s = c.ref(p.Schema, 0)
		}
		if p.Description != "" {
			if _, has := s["description"]; !has {
				s["description"] = p.Description
			}
		}
		props[p.Name] = s
		if p.Required || p.In == openapi3.ParameterInPath {
			required = append(required, p.Name)
		}
		style, explode := p.Style, true
		if style == "" {
			style = map[string]string{"path": "simple", "header": "simple", "query": "form", "cookie": "form"}[p.In]
		}
		if style != "form" {
			explode = false
		}
		if p.Explode != nil {
			explode = *p.Explode
		}
		a.params = append(a.params, param{name: p.Name, in: p.In, style: style, explode: explode})
		return nil
	}
	for _, pr := range op.Parameters {
		if pr.Value != nil {
			if err := add(pr.Value); err != nil {
				return nil, err
			}
		}
	}
	for _, pr := range item.Parameters {
		if pr.Value != nil && op.Parameters.GetByInAndName(pr.Value.In, pr.Value.Name) == nil {
			if err := add(pr.Value); err != nil {
				return nil, err
			}
		}
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		a.body = rb.Value
		types := make([]string, 0, len(rb.Value.Content))
		for t := range rb.Value.Content {
			types = append(types, t)
		}
		sort.Strings(types)
		if _, ok := rb.Value.Content["application/json"]; ok {
			types = append([]string{"application/json"}, types...)
		}
		for _, t := range types {
			if t == "application/json" || strings.HasSuffix(t, "+json") {
				a.bodyType = t
				break
			}
		}
		if a.bodyType == "" {
			return nil, fmt.Errorf("the request body is %s; only JSON bodies are supported", strings.Join(types, ", "))
		}
		s := map[string]any{}
		if mt := rb.Value.Content[a.bodyType]; mt != nil && mt.Schema != nil {
			s = c.ref(mt.Schema, 0)
		}
		props[bodyKey] = s
		if rb.Value.Required {
			required = append(required, bodyKey)
		}
	}
	sort.Strings(required)
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	return json.Marshal(schema)
}

// Card describes the agent: kind openapi, its input schema, reads from
// outside, and its effect (read for GET, egress and write otherwise).
func (a *Agent) Card() agent.Card { return a.card }

// Close releases the agent's idle connections.
func (a *Agent) Close() error { a.client.CloseIdleConnections(); return nil }

// Run checks the arguments against the document, then sends the request.
func (a *Agent) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	for _, e := range a.card.Effects {
		if err := agent.Permit(ctx, e); err != nil {
			return agent.Message{}, err
		}
	}
	args, err := a.decode(in)
	if err != nil {
		return agent.Message{}, err
	}
	req, body, pathParams, err := a.request(ctx, args)
	if err != nil {
		return agent.Message{}, err
	}
	vin := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: pathParams, Route: a.route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true},
	}
	if err := openapi3filter.ValidateRequest(ctx, vin); err != nil {
		return agent.Message{}, &agent.InputError{Agent: a.card.Name, Reason: validationReason(err)}
	}
	if body != nil { // the validator read it
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err := a.headers.Apply(ctx, req.Header); err != nil {
		return agent.Message{}, fmt.Errorf("%s: %w", a.peer, err)
	}
	return httpadapter.Exchange(a.client, a.peer, req)
}

// decode reads the input: a JSON object of parameters and "body". Empty
// input is an empty object.
func (a *Agent) decode(in agent.Message) (map[string]json.RawMessage, error) {
	if len(in.Parts) == 0 || (len(in.Parts) == 1 && in.Parts[0].Kind == agent.PartText && strings.TrimSpace(in.Parts[0].Text) == "") {
		return map[string]json.RawMessage{}, nil
	}
	raw, err := in.Value()
	if err != nil {
		return nil, &agent.InputError{Agent: a.card.Name, Reason: err.Error()}
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, &agent.InputError{Agent: a.card.Name, Reason: "the input must be a JSON object of the operation's parameters (and \"body\")"}
	}
	known := map[string]bool{}
	for _, p := range a.params {
		known[p.name] = true
	}
	if a.body != nil {
		known[bodyKey] = true
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[k] {
			return nil, &agent.InputError{Agent: a.card.Name, Field: k, Reason: "unknown argument: the operation has no such parameter"}
		}
	}
	return args, nil
}

// request builds the HTTP request from the arguments.
func (a *Agent) request(ctx context.Context, args map[string]json.RawMessage) (*http.Request, []byte, map[string]string, error) {
	path := a.route.Path
	pathParams := map[string]string{}
	query := url.Values{}
	hdr := http.Header{}
	var cookies []*http.Cookie
	for _, p := range a.params {
		raw, ok := args[p.name]
		if !ok {
			continue
		}
		vals, err := a.serialize(p, raw)
		if err != nil {
			return nil, nil, nil, err
		}
		if vals == nil {
			continue
		}
		switch p.in {
		case openapi3.ParameterInPath:
			v := strings.Join(vals.values(), ",")
			pathParams[p.name] = v
			path = strings.ReplaceAll(path, "{"+p.name+"}", url.PathEscape(v))
		case openapi3.ParameterInQuery:
			for _, kv := range vals.pairs {
				query.Add(kv[0], kv[1])
			}
		case openapi3.ParameterInHeader:
			hdr.Set(p.name, strings.Join(vals.values(), ","))
		case openapi3.ParameterInCookie:
			cookies = append(cookies, &http.Cookie{Name: p.name, Value: strings.Join(vals.values(), ",")})
		}
	}
	u, err := url.Parse(a.base + path)
	if err != nil {
		return nil, nil, nil, &agent.InputError{Agent: a.card.Name, Reason: "the arguments make an invalid url"}
	}
	u.RawQuery = query.Encode()
	var body []byte
	if raw, ok := args[bodyKey]; ok && a.body != nil {
		body = raw
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, a.method, u.String(), rd)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", a.peer, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	if body != nil {
		req.Header.Set("Content-Type", a.bodyType)
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	return req, body, pathParams, nil
}

// serialized is a parameter's value as name=value pairs (query) or values.
type serialized struct{ pairs [][2]string }

func (s *serialized) values() []string {
	out := make([]string, len(s.pairs))
	for i, kv := range s.pairs {
		out[i] = kv[1]
	}
	return out
}

// serialize renders a parameter's JSON value in its style: scalars as
// text, arrays repeated (form, explode) or comma-joined, objects as
// deepObject or exploded form pairs. nil means absent (null).
func (a *Agent) serialize(p param, raw json.RawMessage) (*serialized, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &agent.InputError{Agent: a.card.Name, Field: p.name, Reason: "not valid JSON"}
	}
	bad := func(why string) error { return &agent.InputError{Agent: a.card.Name, Field: p.name, Reason: why} }
	out := &serialized{}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		var items []string
		for _, e := range x {
			s, ok := httpadapter.Scalar(e)
			if !ok {
				return nil, bad("an array parameter may hold only strings, numbers and booleans")
			}
			items = append(items, s)
		}
		if p.in == openapi3.ParameterInQuery && p.explode {
			for _, s := range items {
				out.pairs = append(out.pairs, [2]string{p.name, s})
			}
		} else {
			out.pairs = append(out.pairs, [2]string{p.name, strings.Join(items, ",")})
		}
	case map[string]any:
		if p.in != openapi3.ParameterInQuery || !(p.style == "deepObject" || p.style == "form" && p.explode) {
			return nil, bad("an object parameter is supported only in a query with style deepObject or an exploded form")
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s, ok := httpadapter.Scalar(x[k])
			if !ok {
				return nil, bad("nested values in an object parameter are not supported")
			}
			name := k
			if p.style == "deepObject" {
				name = p.name + "[" + k + "]"
			}
			out.pairs = append(out.pairs, [2]string{name, s})
		}
	default:
		s, _ := httpadapter.Scalar(x)
		out.pairs = append(out.pairs, [2]string{p.name, s})
	}
	return out, nil
}

// validationReason renders a validator error on one line, without the
// schema dump or the offending value.
func validationReason(err error) string {
	var re *openapi3filter.RequestError
	var se *openapi3.SchemaError
	where := ""
	if errors.As(err, &re) {
		switch {
		case re.Parameter != nil:
			where = fmt.Sprintf("parameter %q in %s", re.Parameter.Name, re.Parameter.In)
		case re.RequestBody != nil:
			where = "body"
		}
	}
	var why string
	if errors.As(err, &se) {
		if ptr := se.JSONPointer(); len(ptr) > 0 {
			if where == "" {
				where = "/" + strings.Join(ptr, "/")
			} else {
				where += " at /" + strings.Join(ptr, "/")
			}
		}
		why = se.Reason
	} else if re != nil {
		why = re.Reason
		if re.Err != nil {
			why = firstLine(re.Err.Error())
			if re.Reason != "" && re.Reason != why {
				why = re.Reason + ": " + why
			}
		}
	}
	if why == "" {
		why = firstLine(err.Error())
	}
	if where == "" {
		return "the request does not match the document: " + why
	}
	return "the request does not match the document: " + where + ": " + why
}
