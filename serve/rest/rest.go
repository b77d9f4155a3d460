// Package rest is the REST door of `babel serve`: the /v1 routes of
// DESIGN.md's contract (graphs, runs, events, cancel, approvals) and the
// OpenAPI 3.1 document that describes them, each a thin translation onto
// the one run path in package service.
//
// A handler here never runs a graph itself, never trusts a principal it
// was not handed by the authenticating middleware, and never writes an
// internal error message: errors go out through httpx.WriteError.
package rest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/serve/internal/httpx"
	"github.com/babelagent/babel/serve/service"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document of the REST surface.
func OpenAPI() []byte { return bytes.Clone(openAPIDoc) }

// Options configures the REST door. Nil means the defaults.
type Options struct {
	// Logger receives internal errors under their correlation ids.
	Logger *slog.Logger
	// WriteTimeout bounds each write of a stream (default 30s); a waiting
	// run's response may take up to the run deadline plus this.
	WriteTimeout time.Duration
	// Heartbeat is how often an idle event stream sends a comment (15s).
	Heartbeat time.Duration
	// Approvals serves GET /v1/approvals and POST /v1/approvals/{id}; nil
	// answers 501 until the approvals store exists. It is called with the
	// principal in the request's context (service.PrincipalFrom).
	Approvals http.Handler
	// Kill serves POST /v1/kill; nil answers 501.
	Kill http.Handler
	// Instrument wraps each route's handler (for metrics); nil leaves them.
	Instrument func(pattern string, h http.Handler) http.Handler
}

type handler struct {
	svc  *service.Service
	opts Options
	log  *slog.Logger
	// bodies recycles request body buffers: a run's body is read whole (it
	// is capped by the middleware) and decoded without reflection.
	bodies sync.Pool
}

// New returns the handler of every /v1 route.
func New(svc *service.Service, opts *Options) http.Handler {
	h := &handler{svc: svc}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.WriteTimeout <= 0 {
		h.opts.WriteTimeout = 30 * time.Second
	}
	if h.opts.Heartbeat <= 0 {
		h.opts.Heartbeat = 15 * time.Second
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	approvals := h.opts.Approvals
	if approvals == nil {
		approvals = http.HandlerFunc(h.approvalsNotImplemented)
	}
	mux := http.NewServeMux()
	handle := func(pattern string, f http.Handler) {
		if h.opts.Instrument != nil {
			f = h.opts.Instrument(pattern, f)
		}
		mux.Handle(pattern, f)
	}
	handle("GET /v1/graphs", http.HandlerFunc(h.listGraphs))
	handle("POST /v1/graphs/{name}/runs", http.HandlerFunc(h.startRun))
	handle("GET /v1/runs", http.HandlerFunc(h.listRuns))
	handle("GET /v1/runs/{id}", http.HandlerFunc(h.getRun))
	handle("GET /v1/runs/{id}/events", http.HandlerFunc(h.events))
	handle("POST /v1/runs/{id}/cancel", http.HandlerFunc(h.cancel))
	kill := h.opts.Kill
	if kill == nil {
		kill = http.HandlerFunc(h.approvalsNotImplemented)
	}
	handle("POST /v1/kill", kill)
	handle("GET /v1/approvals", approvals)
	handle("POST /v1/approvals/{id}", approvals)
	handle("GET /v1/openapi.json", http.HandlerFunc(h.openAPI))
	handle("/v1/", http.HandlerFunc(h.notFound))
	return mux
}

func (h *handler) principal(w http.ResponseWriter, r *http.Request) (service.Principal, bool) {
	p, ok := service.PrincipalFrom(r.Context())
	if !ok {
		h.fail(w, r, &service.Error{Code: service.CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"})
	}
	return p, ok
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpx.WriteError(w, h.log, r, err)
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, &service.Error{Code: service.CodeNotFound, Status: http.StatusNotFound,
		Message: "no such route; see GET /v1/openapi.json"})
}

func (h *handler) approvalsNotImplemented(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.principal(w, r); !ok {
		return
	}
	h.fail(w, r, &service.Error{Code: service.CodeNotImplemented, Status: http.StatusNotImplemented,
		Message: "approvals are not served yet: a run that needs one ends with status awaiting_approval"})
}

func (h *handler) openAPI(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.principal(w, r); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

func (h *handler) listGraphs(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	gs, err := h.svc.Graphs(r.Context(), p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := json.Marshal(map[string]any{"graphs": gs})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, b)
}

// runBody is POST /v1/graphs/{name}/runs's body.
type runBody struct {
	Input     json.RawMessage
	DeadlineS json.RawMessage
	Wait      bool
}

// decodeRunBody reads and checks the body; errors name what is wrong.
func (h *handler) decodeRunBody(r *http.Request) (*runBody, time.Duration, error) {
	buf, _ := h.bodies.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	defer h.bodies.Put(buf)
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, 0, err
		}
		return nil, 0, service.BadRequest(service.CodeBadRequest, "the request body could not be read")
	}
	var b runBody
	if err := parseRunBody(buf.Bytes(), &b); err != nil {
		return nil, 0, err
	}
	var deadline time.Duration
	if raw := b.DeadlineS; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return nil, 0, service.BadRequest(service.CodeInvalidLimit, "deadline_s must be a JSON number of seconds (finite, greater than 0), not %s", kindOf(raw))
		}
		secs, err := strconv.ParseFloat(string(raw), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, 0, service.BadRequest(service.CodeInvalidLimit, "deadline_s must be a finite number of seconds greater than 0")
		}
		var derr error
		if deadline, derr = h.svc.ClampDeadline(secs); derr != nil {
			return nil, 0, derr
		}
	}
	return &b, deadline, nil
}

// parseRunBody decodes {"input": ..., "deadline_s": ..., "wait": ...}.
// The body is copied out of data (which is recycled).
func parseRunBody(data []byte, b *runBody) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return service.BadRequest(service.CodeInvalidJSON, `the body is empty: send {"input": ...}`)
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return service.BadRequest(service.CodeInvalidJSON, "the body is not valid JSON: %s", clean(err))
	}
	if data[0] != '{' {
		return service.BadRequest(service.CodeBadRequest, `the body must be a JSON object: {"input": ...}`)
	}
	seen := 0
	err := members(data, func(key string, val []byte) error {
		var bit int
		switch key {
		case "input":
			bit, b.Input = 1, bytes.Clone(val)
		case "deadline_s":
			bit, b.DeadlineS = 2, bytes.Clone(val)
		case "wait":
			bit = 4
			switch string(val) {
			case "true":
				b.Wait = true
			case "false", "null":
			default:
				return service.BadRequest(service.CodeBadRequest, `field "wait" must be true or false`)
			}
		default:
			return service.BadRequest(service.CodeBadRequest, "unknown field %q (allowed: input, deadline_s, wait)", clip(key, 64))
		}
		if seen&bit != 0 {
			return service.BadRequest(service.CodeBadRequest, "field %q is given twice", key)
		}
		seen |= bit
		return nil
	})
	if err != nil {
		return err
	}
	if len(b.Input) == 0 {
		return service.BadRequest(service.CodeBadRequest, `the body needs "input": the graph's input (any JSON value)`)
	}
	return nil
}

// members calls f with each member of the JSON object in data, which must
// be valid JSON (checked by the caller).
func members(data []byte, f func(key string, val []byte) error) error {
	i := skipSpace(data, 1)
	for i < len(data) && data[i] != '}' {
		end := valueEnd(data, i)
		var key string
		if bytes.IndexByte(data[i:end], '\\') >= 0 {
			_ = json.Unmarshal(data[i:end], &key)
		} else {
			key = string(data[i+1 : end-1])
		}
		i = skipSpace(data, end) + 1 // the colon
		i = skipSpace(data, i)
		end = valueEnd(data, i)
		if err := f(key, data[i:end]); err != nil {
			return err
		}
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value starting at i.
func valueEnd(data []byte, i int) int {
	depth, inStr, esc := 0, false, false
	for j := i; j < len(data); j++ {
		c := data[j]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 0 {
					return j + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return j
			}
		}
	}
	return len(data)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func kindOf(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "that value"
}

func clean(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (h *handler) startRun(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	body, deadline, err := h.decodeRunBody(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req := &service.StartRequest{Graph: r.PathValue("name"), Input: agent.FromJSON(body.Input), Deadline: deadline}
	if body.Wait {
		// The response comes when the run ends: allow for the whole deadline.
		wait := h.svc.RunDeadline()
		if deadline > 0 {
			wait = deadline
		}
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + h.opts.WriteTimeout))
		v, err := h.svc.Run(r.Context(), p, req)
		switch {
		case v == nil:
			h.fail(w, r, err)
		case err != nil:
			// The caller went away; the run was cancelled and there is nobody to tell.
		default:
			httpx.WriteJSON(w, http.StatusOK, v.JSON)
		}
		return
	}
	id, err := h.svc.Start(r.Context(), p, req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/runs/"+id)
	httpx.WriteJSON(w, http.StatusAccepted, fmt.Appendf(nil, `{"run_id":%q,"status":%q}`, id, run.StatusRunning))
}

func (h *handler) getRun(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	v, err := h.svc.Get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, v.JSON)
}

func (h *handler) listRuns(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			h.fail(w, r, service.BadRequest(service.CodeBadRequest, "limit must be a whole number from 1 to 1000"))
			return
		}
		limit = n
	}
	vs, err := h.svc.List(r.Context(), p, limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var b bytes.Buffer
	b.WriteString(`{"runs":[`)
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(v.JSON)
	}
	b.WriteString("]}")
	httpx.WriteJSON(w, http.StatusOK, b.Bytes())
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	ctx, stop := context.WithTimeout(r.Context(), 5*time.Second)
	defer stop()
	v, err := h.svc.Cancel(ctx, p, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, v.JSON)
}

// events streams a run's events as server-sent events: the history first,
// then live events, ending after run.finished. Each event's id is its
// index; Last-Event-ID resumes after it.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	from := 0
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			h.fail(w, r, service.BadRequest(service.CodeBadRequest, "Last-Event-ID must be an event index"))
			return
		}
		from = n + 1
	}
	sub, err := h.svc.Subscribe(r.Context(), p, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sw := httpx.NewSlidingWriter(w, h.opts.WriteTimeout)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	sw.WriteHeader(http.StatusOK)
	sw.Flush()
	var buf []byte
	_ = sub.Stream(r.Context(), from, h.opts.Heartbeat, func(i int, ev *run.Event) error {
		buf = buf[:0]
		if ev == nil {
			buf = append(buf, ": keep-alive\n\n"...)
		} else {
			data, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			buf = fmt.Appendf(buf, "id: %d\nevent: %s\ndata: %s\n\n", i, ev.Type, data)
		}
		if _, err := sw.Write(buf); err != nil {
			return err
		}
		sw.Flush()
		return nil
	})
}
