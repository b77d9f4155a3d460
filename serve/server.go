// Package serve is `babel serve`: one HTTP server that puts the graphs it
// was given behind three doors — REST (/v1), MCP (/mcp, and stdio for
// `babel mcp`) and A2A (/a2a and the agent card) — all calling the one run
// path in package service, behind one hardened middleware.
//
// Every protection is on by default and none can be switched off by
// configuration: it binds loopback unless told otherwise and refuses a
// non-loopback bind without bearer tokens; compares tokens in constant
// time; pins the Host header to loopback names on a loopback bind (against
// DNS rebinding); refuses browser requests from other origins; caps request
// bodies before buffering them; sets every server timeout; bounds runs in
// flight and each principal's rate; and sends callers only sanitized,
// bounded responses.
//
// This package must never load a graph, config or token file it was not
// given an explicit path to, never serve without a principal on a request
// (except /healthz), and never write an internal error to a response.
package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/serve/a2aserver"
	"github.com/babelagent/babel/serve/internal/httpx"
	"github.com/babelagent/babel/serve/mcpserver"
	"github.com/babelagent/babel/serve/rest"
	"github.com/babelagent/babel/serve/service"
)

// Options are what the program gives a server beyond its configuration.
// Nil means the defaults.
type Options struct {
	// Tokens maps bearer tokens to principals; nil means Config.TokenFile's,
	// or none.
	Tokens *Tokens
	// LocalPrincipal is the principal of requests on a loopback server
	// without tokens (default "local").
	LocalPrincipal string
	// Executor runs the graphs (the engine, in `babel serve`); nil means a
	// run.Runner over Kernel.
	Executor service.Executor
	// Kernel runs every node when Executor is nil; nil means kernel.New(nil).
	Kernel *kernel.Kernel
	// Authorizer narrows what principals may do (see service.Authorizer);
	// the engine's policy fits.
	Authorizer service.Authorizer
	// Redactor cleans what is logged (the engine's, in `babel serve`).
	Redactor service.Redactor
	// Store keeps finished runs; nil means in memory.
	Store service.RunStore
	// Approvals serves /v1/approvals; nil answers 501.
	Approvals http.Handler
	// Kill serves POST /v1/kill (the global kill switch); nil answers 501.
	Kill http.Handler
	// Logger receives errors (with correlation ids) and refusals; nil
	// discards. Give it a redacting handler.
	Logger *slog.Logger
	// Version is reported by the MCP and A2A doors.
	Version string
}

// ErrNoToken is returned when a non-loopback address would be served
// without bearer tokens.
var ErrNoToken = errors.New("refusing to serve a non-loopback address without a token: give --token-file, or listen on 127.0.0.1")

// Server is a configured `babel serve`.
type Server struct {
	cfg     Config
	tokens  *Tokens
	local   service.Principal
	svc     *service.Service
	metrics *metrics
	log     *slog.Logger
	handler http.Handler
	mcp     *mcp.Server
	origins map[string]bool
	hosts   map[string]bool

	// set when serving starts
	loopback atomic.Bool
	port     atomic.Value // string
}

// New builds a server for graphs. It reads Config.TokenFile if Options
// gives no tokens.
func New(graphs []*graph.Graph, cfg *Config, opts *Options) (*Server, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if len(graphs) == 0 {
		return nil, errors.New("no graph to serve: give at least one topology file")
	}
	s := &Server{cfg: cfg.withDefaults(), tokens: o.Tokens, log: o.Logger, origins: map[string]bool{}, hosts: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tokens == nil && s.cfg.TokenFile != "" {
		t, err := LoadTokens(s.cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		s.tokens = t
	}
	if o.LocalPrincipal == "" {
		o.LocalPrincipal = "local"
	}
	s.local = service.Principal{ID: o.LocalPrincipal, Kind: "local"}
	for _, h := range s.cfg.AllowedHosts {
		s.hosts[strings.ToLower(h)] = true
	}
	for _, og := range s.cfg.AllowedOrigins {
		u, err := url.Parse(og)
		if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" {
			return nil, fmt.Errorf("allowed origin %q: want scheme://host[:port]", og)
		}
		s.origins[strings.ToLower(og)] = true
	}
	var svc *service.Service
	names := make([]string, len(graphs))
	for i, g := range graphs {
		names[i] = g.Name
	}
	// The gauge is read at scrape time only, once svc is set.
	s.metrics = newMetrics(names, func() int { return svc.Active() })
	svc, err := service.New(graphs, &service.Options{
		Executor: o.Executor, Kernel: o.Kernel, Redactor: o.Redactor, RunDeadline: s.cfg.RunDeadline.D(), MaxConcurrentRuns: s.cfg.MaxConcurrentRuns,
		Rate: s.cfg.RatePerPrincipal, Burst: s.cfg.Burst, History: s.cfg.History, Store: o.Store,
		MaxOutputBytes: s.cfg.MaxOutputBytes, MaxOutputDepth: s.cfg.MaxOutputDepth,
		Authorizer: o.Authorizer, Logger: s.log, Observer: s.metrics,
	})
	if err != nil {
		return nil, err
	}
	s.svc = svc
	s.handler = s.routes(o)
	return s, nil
}

// Service returns the server's run path.
func (s *Server) Service() *service.Service { return s.svc }

// Handler returns the server's HTTP handler, middleware included. It
// behaves as on a loopback bind until Serve is called.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes(o Options) http.Handler {
	mux := http.NewServeMux()
	wt := s.cfg.WriteTimeout.D()
	handle := func(pattern string, h http.Handler) { mux.Handle(pattern, s.metrics.instrument(pattern, h)) }

	mux.Handle("/v1/", rest.New(s.svc, &rest.Options{Logger: s.log, WriteTimeout: wt, Approvals: o.Approvals, Kill: o.Kill,
		Instrument: s.metrics.instrument}))

	mcpOpts := &mcpserver.Options{Version: o.Version, Logger: s.log}
	httpOpts := &mcpserver.HTTPOptions{MaxBodyBytes: s.cfg.MaxBodyBytes, Logger: s.log}
	if s.tokens.Len() > 0 {
		httpOpts.Verify = s.tokens.Lookup
	} else {
		local := s.local
		mcpOpts.Local = &local
	}
	s.mcp = mcpserver.New(s.svc, mcpOpts)
	mcpH := mcpserver.HTTPHandler(s.mcp, httpOpts)
	handle("/mcp", streaming(wt, mcpH))

	a2 := a2aserver.New(s.svc, &a2aserver.Options{Version: o.Version, PublicURL: strings.TrimSuffix(s.cfg.PublicURL, "/"),
		Bearer: s.tokens.Len() > 0, Logger: s.log})
	handle("POST "+a2aserver.PathJSONRPC, streaming(wt, buffered(s.cfg.MaxBodyBytes, a2.JSONRPC())))
	handle("POST "+a2aserver.PathJSONRPC03, streaming(wt, buffered(s.cfg.MaxBodyBytes, a2.JSONRPC03())))
	handle("GET "+a2aserver.PathCard, a2.CardHandler())

	handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	}))
	handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, s.log, r, &service.Error{Code: service.CodeNotFound, Status: http.StatusNotFound,
			Message: "no such route; see GET /v1/openapi.json"})
	})
	return s.guard(mux)
}

// streaming keeps a long response's write deadline moving with each write.
func streaming(timeout time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(httpx.NewSlidingWriter(w, timeout), r)
	})
}

// buffered reads the (capped) body before h sees it, so a body over the cap
// is a 413 whatever h would make of a short read.
func buffered(max int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			httpx.WriteError(w, nil, r, bodyReadError(err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	})
}

func bodyReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return service.BadRequest(service.CodeBadRequest, "the request body could not be read")
}

// guard is the middleware every request passes, in this order: recover,
// Host pinning, origin check, body cap, authentication.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				id := service.NewCorrelationID()
				s.log.Error("handler panicked", "correlation_id", id, "path", r.URL.Path, "panic", fmt.Sprint(v))
				httpx.WriteError(w, nil, r, &service.Error{Code: service.CodeInternal, Status: http.StatusInternalServerError, Message: "internal error"})
			}
		}()
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !s.hostAllowed(r.Host) {
			s.refuse(w, r, "host", http.StatusForbidden, service.CodeForbidden,
				"the Host header is not one this server answers to")
			return
		}
		if !s.originAllowed(r) {
			s.refuse(w, r, "origin", http.StatusForbidden, service.CodeForbidden,
				"cross-origin browser requests are refused")
			return
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.refuse(w, r, "body", http.StatusRequestEntityTooLarge, service.CodeBodyTooLarge,
				"the request body is over the "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+"-byte limit")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		p, ok := s.authenticate(r)
		if !ok {
			s.refuse(w, r, "auth", http.StatusUnauthorized, service.CodeUnauthorized,
				"a valid bearer token is required: Authorization: Bearer TOKEN")
			return
		}
		next.ServeHTTP(w, r.WithContext(service.WithPrincipal(r.Context(), p)))
	})
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, status int, code service.Code, msg string) {
	s.metrics.refused.WithLabelValues(reason).Inc()
	httpx.WriteError(w, nil, r, &service.Error{Code: code, Status: status, Message: msg})
}

// authenticate returns the request's principal: its bearer token's when the
// server has tokens, else the local principal.
func (s *Server) authenticate(r *http.Request) (service.Principal, bool) {
	if s.tokens.Len() == 0 {
		return s.local, true
	}
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return service.Principal{}, false
	}
	return s.tokens.Lookup(strings.TrimSpace(h[len(prefix):]))
}

// hostAllowed pins the Host header. On a loopback bind, only loopback names
// with the bound port (and AllowedHosts) pass, so a page whose DNS name was
// rebound to 127.0.0.1 cannot reach the server. Elsewhere, AllowedHosts
// applies when set.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	lh := strings.ToLower(host)
	if s.hosts[lh] {
		return true
	}
	if !s.loopback.Load() && s.started() {
		return len(s.hosts) == 0
	}
	name, port, err := net.SplitHostPort(lh)
	if err != nil {
		name, port = strings.Trim(lh, "[]"), "80"
	}
	bound, _ := s.port.Load().(string)
	if bound != "" && port != bound {
		return false
	}
	return name == "127.0.0.1" || name == "localhost" || name == "::1"
}

func (s *Server) started() bool {
	p, _ := s.port.Load().(string)
	return p != ""
}

// originAllowed refuses browser requests made from another origin: an
// Origin header that is not this server (or an allowed origin), or a
// Sec-Fetch-Site that says cross-site or same-site.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if s.origins[strings.ToLower(origin)] {
			return true
		}
		u, err := url.Parse(origin)
		if err != nil || origin == "null" || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return false
		}
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// Listen binds the configured address. It refuses a non-loopback address
// when the server has no token.
func (s *Server) Listen(ctx context.Context) (net.Listener, error) {
	host, _, err := net.SplitHostPort(s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: want host:port, such as %s", s.cfg.Listen, DefaultListen)
	}
	if !loopbackName(host) && s.tokens.Len() == 0 {
		return nil, ErrNoToken
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Serve serves on ln until ctx ends, then shuts down: new requests are
// refused, runs in flight are cancelled, and Serve waits (up to 10s) for
// handlers to finish. A non-loopback listener without tokens is refused.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return fmt.Errorf("serve: %s is not a TCP listener", ln.Addr())
	}
	loop := addr.IP.IsLoopback()
	if !loop && s.tokens.Len() == 0 {
		return ErrNoToken
	}
	s.loopback.Store(loop)
	s.port.Store(strconv.Itoa(addr.Port))
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout.D(),
		ReadTimeout:       s.cfg.ReadTimeout.D(),
		WriteTimeout:      s.cfg.WriteTimeout.D(),
		IdleTimeout:       s.cfg.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		_ = s.svc.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.svc.Close(sctx)
	s.closeMCPSessions()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// closeMCPSessions ends the MCP sessions clients left open.
func (s *Server) closeMCPSessions() {
	var open []*mcp.ServerSession
	for ss := range s.mcp.Sessions() {
		open = append(open, ss)
	}
	for _, ss := range open {
		_ = ss.Close()
	}
}

// Close stops the service's runs and MCP sessions; for servers used through
// Handler only.
func (s *Server) Close(ctx context.Context) error {
	s.closeMCPSessions()
	return s.svc.Close(ctx)
}
