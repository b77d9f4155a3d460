package http

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/secrets"
)

// Auth says how a request authenticates, by the name of a secret the node
// declares; the value is read from agent.SecretsFrom at call time.
type Auth struct {
	// Bearer names the secret sent as "Authorization: Bearer <value>".
	Bearer string `json:"bearer,omitempty"`
	// Header and Secret send the secret named Secret as the header Header
	// (an API-key header such as X-Api-Key).
	Header string `json:"header,omitempty"`
	Secret string `json:"secret,omitempty"`
}

// Headers are the headers an agent adds to every request: literal ones
// and ones whose value holds a secret, written {{secret:NAME}} in the
// topology and filled in only when the request is made.
//
// A Headers never holds a secret's value. It is safe for concurrent use.
type Headers struct {
	static  http.Header
	dynamic []secretHeader
	names   []string
}

type secretHeader struct {
	name  string
	parts []string // literal, secret name, literal, secret name, ..., literal
}

var secretRef = regexp.MustCompile(`\{\{\s*secret:([A-Za-z0-9_]+)\s*\}\}`)

// reserved headers are set by the transport or by the adapter itself.
var reserved = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authorization": true,
}

// sensitive headers may only carry a secret reference, never a literal.
var sensitive = map[string]bool{"Authorization": true, "Cookie": true, "X-Api-Key": true, "Api-Key": true}

// NewHeaders compiles literal headers and auth into Headers. When declared
// is non-nil it is the node's secrets: list, and every secret named must be
// on it; a nil declared accepts any name (the Go API, where the card's
// Secrets become the node's declaration).
func NewHeaders(headers map[string]string, auth *Auth, declared []string) (*Headers, error) {
	h := &Headers{static: http.Header{}}
	need := func(field, name string) error {
		if secrets.CheckName(name) != nil {
			return fmt.Errorf("%s: %q is not a secret name (want NAMES_LIKE_THIS)", field, name)
		}
		if declared != nil && !slices.Contains(declared, name) {
			return fmt.Errorf("%s names secret %s, which the node does not declare: add it under the node's secrets:", field, name)
		}
		if !slices.Contains(h.names, name) {
			h.names = append(h.names, name)
		}
		return nil
	}
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := headers[k]
		if !validHeaderName(k) {
			return nil, fmt.Errorf("headers: %q is not a valid header name", k)
		}
		ck := http.CanonicalHeaderKey(k)
		if reserved[ck] {
			return nil, fmt.Errorf("headers: %s is set by the transport and cannot be configured", ck)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("headers: %s: the value holds a line break or NUL", ck)
		}
		refs := secretRef.FindAllStringSubmatchIndex(v, -1)
		if len(refs) == 0 {
			if sensitive[ck] && v != "" {
				return nil, fmt.Errorf("headers: %s must not hold a literal value: name a secret under secrets: and write {{secret:NAME}}, or use auth:", ck)
			}
			h.static.Add(ck, v)
			continue
		}
		sh := secretHeader{name: ck}
		last := 0
		for _, m := range refs {
			name := v[m[2]:m[3]]
			if err := need("headers."+ck, name); err != nil {
				return nil, err
			}
			sh.parts = append(sh.parts, v[last:m[0]], name)
			last = m[1]
		}
		sh.parts = append(sh.parts, v[last:])
		h.dynamic = append(h.dynamic, sh)
	}
	if auth != nil {
		switch {
		case auth.Bearer != "" && (auth.Header != "" || auth.Secret != ""):
			return nil, fmt.Errorf("auth: give either bearer or header with secret, not both")
		case auth.Bearer != "":
			if err := need("auth.bearer", auth.Bearer); err != nil {
				return nil, err
			}
			h.dynamic = append(h.dynamic, secretHeader{name: "Authorization", parts: []string{"Bearer ", auth.Bearer, ""}})
		case auth.Header != "" || auth.Secret != "":
			if auth.Header == "" || auth.Secret == "" {
				return nil, fmt.Errorf("auth: header and secret go together (header: X-Api-Key, secret: NAME)")
			}
			if !validHeaderName(auth.Header) || reserved[http.CanonicalHeaderKey(auth.Header)] {
				return nil, fmt.Errorf("auth.header: %q cannot carry a credential", auth.Header)
			}
			if err := need("auth.secret", auth.Secret); err != nil {
				return nil, err
			}
			h.dynamic = append(h.dynamic, secretHeader{name: http.CanonicalHeaderKey(auth.Header), parts: []string{"", auth.Secret, ""}})
		}
	}
	return h, nil
}

// Secrets lists the names of the secrets the headers need.
func (h *Headers) Secrets() []string {
	if h == nil {
		return nil
	}
	return slices.Clone(h.names)
}

// Apply sets the headers on hdr, reading secret values from the call's
// secrets. A missing secret is an error that names it, never its value.
func (h *Headers) Apply(ctx context.Context, hdr http.Header) error {
	if h == nil {
		return nil
	}
	for k, vs := range h.static {
		hdr[k] = slices.Clone(vs)
	}
	if len(h.dynamic) == 0 {
		return nil
	}
	ss := agent.SecretsFrom(ctx)
	for _, sh := range h.dynamic {
		var b strings.Builder
		for i, p := range sh.parts {
			if i%2 == 0 {
				b.WriteString(p)
				continue
			}
			s, ok := ss.Get(p)
			if !ok || s.IsZero() {
				return fmt.Errorf("secret %s was not given to this call: declare it under the node's secrets: and make sure it is set", p)
			}
			v := s.Reveal()
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("secret %s holds a line break or NUL and cannot go in a header", p)
			}
			b.WriteString(v)
		}
		hdr.Set(sh.name, b.String())
	}
	return nil
}

// Client returns eg's guarded client for one call, with the headers added
// to each request inside the guard's transport (so they go only where the
// guard lets the request go), their secret values read from ctx, the
// call's. When ctx has a deadline, it bounds the call, a long stream
// included, instead of the guard's default timeout.
func (h *Headers) Client(ctx context.Context, eg *egress.Client) *http.Client {
	hc := eg.HTTPClient()
	if _, ok := ctx.Deadline(); ok {
		hc.Timeout = 0
	}
	hc.Transport = &headerTransport{ctx: ctx, headers: h, next: hc.Transport}
	return hc
}

// headerTransport adds the headers to each request.
type headerTransport struct {
	ctx     context.Context // the call's: it carries the call's secrets
	headers *Headers
	next    http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if err := t.headers.Apply(t.ctx, r.Header); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
