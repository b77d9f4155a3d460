package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// How JavaScript with Spec.Egress reaches the network.
//
// The wasm sandbox has no sockets, and keeps none. QuickJS imports one host
// function, env.jsFunctionProxy, through which JavaScript calls Go. The
// template binds it to a JavaScript function that only the harness holds;
// the harness defines the globals fetch, Headers and Response from it when
// (and only when) the call declares egress. fetch hands one JSON request to
// Go, where jsFetcher, carried by the call's context, performs it with an
// egress.Client built from Spec.Egress: the host is checked against the
// allowlist and the address dialed is checked at connect time, exactly as
// the os sandbox's proxy does. A call without egress has no fetch, and the
// host function refuses it anyway: it finds no jsFetcher in the context.
//
// fetch is a subset of the web's: fetch(url, {method, headers, body})
// returns a Promise of a Response with status, statusText, ok, url,
// headers (get, has, forEach, entries) and text() and json(). It blocks the
// code while the request is in flight: requests run one at a time. The body
// sent is a string; the body received is text (UTF-8; invalid bytes become
// U+FFFD), at most Spec.Egress.MaxResponseBytes (egress's default when
// zero). Redirects are not followed: a 3xx is the Response, with its
// Location header. A refusal or a failure rejects the Promise with a
// TypeError that says why. The call's deadline and cancellation stop a
// request in flight.

// jsHostFunction is the id the template binds the host function to.
const jsHostFunction = 1

// jsFetcherKey carries a call's *jsFetcher in its context.
type jsFetcherKey struct{}

// jsFetcher performs the requests of one JavaScript call.
type jsFetcher struct {
	client  *egress.Client
	http    *http.Client
	refused atomic.Int64
}

func newJSFetcher(opts *egress.Options) (*jsFetcher, error) {
	o := *opts
	// As in the os sandbox: always an allowlist, and the client dials
	// itself. Redirects are never followed (see below).
	o.AnyPublicHost, o.Proxy, o.FollowRedirects = false, nil, 0
	client, err := egress.New(&o)
	if err != nil {
		return nil, &SpecError{Field: "Egress", Reason: err.Error()}
	}
	hc := client.HTTPClient()
	// A redirect is the response: the code decides whether to ask again,
	// and the next request is checked like the first.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &jsFetcher{client: client, http: hc}, nil
}

// close drops the client's idle connections.
func (f *jsFetcher) close() { f.client.CloseIdleConnections() }

func (f *jsFetcher) stats() EgressStats {
	sent, recvd := f.client.Bytes()
	return EgressStats{Sent: sent, Received: recvd, Refused: f.refused.Load()}
}

// jsRequest is what fetch hands to Go.
type jsRequest struct {
	URL     string      `json:"url"`
	Method  string      `json:"method"`
	Headers [][2]string `json:"headers"`
	Body    *string     `json:"body"`
}

// jsResponse is what Go hands back: a response, or Error.
type jsResponse struct {
	Status     int         `json:"status,omitempty"`
	StatusText string      `json:"statusText,omitempty"`
	URL        string      `json:"url,omitempty"`
	Headers    [][2]string `json:"headers,omitempty"`
	Body       string      `json:"body"`
	Error      string      `json:"error,omitempty"`
}

// do performs one request and returns the JSON of a jsResponse.
func (f *jsFetcher) do(ctx context.Context, reqJSON string) string {
	resp, err := f.roundTrip(ctx, reqJSON)
	if err != nil {
		var pe *egress.PolicyError
		if errors.As(err, &pe) {
			f.refused.Add(1)
		}
		resp = &jsResponse{Error: fetchError(ctx, err)}
	}
	b, err := json.Marshal(resp)
	if err != nil { // only strings and ints: cannot happen
		b = []byte(`{"error":"cannot encode the response"}`)
	}
	return string(b)
}

func (f *jsFetcher) roundTrip(ctx context.Context, reqJSON string) (*jsResponse, error) {
	var r jsRequest
	if err := json.Unmarshal([]byte(reqJSON), &r); err != nil {
		return nil, fmt.Errorf("malformed request: %w", err)
	}
	var body io.Reader
	if r.Body != nil {
		body = strings.NewReader(*r.Body)
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL, body)
	if err != nil {
		return nil, err
	}
	for _, h := range r.Headers {
		req.Header.Add(h[0], h[1])
	}
	// The request's bytes count against the run's egress budget before
	// they leave, the response's once they are read (as for http nodes).
	if err := agent.ChargeEgress(ctx, max(req.ContentLength, 0)+int64(len(r.URL))); err != nil {
		return nil, err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if err := agent.ChargeEgress(ctx, int64(len(data))); err != nil {
		return nil, err
	}
	out := &jsResponse{
		Status:     resp.StatusCode,
		StatusText: http.StatusText(resp.StatusCode),
		URL:        r.URL,
		Body:       string(data),
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			out.Headers = append(out.Headers, [2]string{strings.ToLower(k), v})
		}
	}
	return out, nil
}

// fetchError says why a request failed, without the URL's query or
// userinfo.
func fetchError(ctx context.Context, err error) string {
	var pe *egress.PolicyError
	var le *egress.LimitError
	switch {
	case errors.As(err, &pe):
		return pe.Error()
	case errors.As(err, &le):
		return le.Error()
	case ctx.Err() != nil:
		return "request stopped: " + ctx.Err().Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "request timed out"
	}
	// A *url.Error names the URL: keep only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// jsHostCall is env.jsFunctionProxy, which QuickJS calls for a function
// bound to the host: (ctx, this, argc, argv) -> JSValue. argv holds the
// binding's id, a context id, an async flag and a promise (all set by the
// binding), then the function's arguments. The only binding is fetch's,
// with one argument: the request as JSON text; it returns the response as
// JSON text.
func jsHostCall(ctx context.Context, mod api.Module, stack []uint64) {
	jctx, argc, argv := stack[0], uint32(stack[2]), uint32(stack[3])
	q := &qjsCall{ctx: ctx, mod: mod}
	var out string
	f, _ := ctx.Value(jsFetcherKey{}).(*jsFetcher)
	switch {
	case f == nil:
		out = `{"error":"this code declares no egress: it has no network"}`
	case argc != 5:
		out = `{"error":"want one argument"}`
	default:
		arg, ok := mod.Memory().ReadUint64Le(argv + 4*8)
		if !ok {
			panic(errors.New("quickjs: host call arguments out of range"))
		}
		req := q.takeString(jctx, arg)
		if q.err != nil {
			panic(q.err)
		}
		out = f.do(ctx, req)
	}
	p := q.cstring(out)
	v := q.call("QJS_NewString", jctx, p)
	q.call("free", p)
	if q.err != nil {
		panic(q.err) // ends the call: the guest cannot go on
	}
	stack[0] = v
}

// takeString is toString for a string that is freed afterwards.
func (q *qjsCall) takeString(jctx, v uint64) string {
	s, bytesAt, headerAt := q.cString(jctx, v)
	if q.err == nil {
		q.call("JS_FreeCString", jctx, bytesAt)
		q.call("free", headerAt)
	}
	return s
}
