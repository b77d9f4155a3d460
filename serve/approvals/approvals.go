// Package approvals is the REST door to the calls that wait for a human:
// GET /v1/approvals lists the pending calls the caller may decide, each
// with the exact call (node, adapter, destination, canonical arguments and
// digest); POST /v1/approvals/{id} records {"decision", "digest"} and
// resumes the run under its own principal.
//
// Only an authenticated principal with approval.decide on the graph may
// decide — never message content, a tool result or a model — and a
// decision binds the digest the approver was shown.
package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/serve/internal/httpx"
	"github.com/babelagent/babel/serve/service"
)

// Engine holds the approvals and decides them.
type Engine interface {
	PendingApprovals(ctx context.Context) ([]*kernel.ApprovalRequest, error)
	Decide(ctx context.Context, id, decision, digest, approver string) (*kernel.ApprovalRequest, error)
	Authorize(ctx context.Context, principal, action, resource string) error
}

// Starter resumes a run (the service of `babel serve`).
type Starter interface {
	Start(ctx context.Context, p service.Principal, req *service.StartRequest) (string, error)
}

// Options configures the handler.
type Options struct {
	Logger *slog.Logger
	// IsConflict reports errors that mean the decision no longer applies
	// (stale digest, not pending): 409.
	IsConflict func(error) bool
	// IsForbidden reports refusals (no approve right, self-approval): 403.
	IsForbidden func(error) bool
	// IsNotFound reports an unknown approval: 404.
	IsNotFound func(error) bool
}

type handler struct {
	eng  Engine
	svc  Starter
	opts Options
}

// New returns the handler of GET /v1/approvals and POST /v1/approvals/{id}.
func New(eng Engine, svc Starter, opts *Options) http.Handler {
	h := &handler{eng: eng, svc: svc}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Logger == nil {
		h.opts.Logger = slog.New(slog.DiscardHandler)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := service.PrincipalFrom(r.Context())
	if !ok {
		httpx.WriteError(w, h.opts.Logger, r, &service.Error{Code: service.CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"})
		return
	}
	if r.Method == http.MethodGet {
		h.list(w, r, p)
		return
	}
	h.decide(w, r, p)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request, p service.Principal) {
	all, err := h.eng.PendingApprovals(r.Context())
	if err != nil {
		httpx.WriteError(w, h.opts.Logger, r, err)
		return
	}
	mine := []*kernel.ApprovalRequest{}
	for _, a := range all {
		if h.eng.Authorize(r.Context(), p.ID, "approval.decide", a.Graph) == nil {
			mine = append(mine, a)
		}
	}
	b, _ := json.Marshal(map[string]any{"approvals": mine})
	httpx.WriteJSON(w, http.StatusOK, b)
}

type decision struct {
	Decision string `json:"decision"`
	Digest   string `json:"digest"`
}

func (h *handler) decide(w http.ResponseWriter, r *http.Request, p service.Principal) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		httpx.WriteError(w, h.opts.Logger, r, err)
		return
	}
	var d decision
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		httpx.WriteError(w, h.opts.Logger, r, service.BadRequest(service.CodeInvalidJSON, "the body must be {\"decision\": \"approve\"|\"deny\"|\"terminate\", \"digest\": \"sha256:...\"}"))
		return
	}
	switch d.Decision {
	case "approve", "deny", "terminate":
	default:
		httpx.WriteError(w, h.opts.Logger, r, service.BadRequest(service.CodeBadRequest, "decision must be approve, deny or terminate, not %q", clip(d.Decision)))
		return
	}
	if d.Digest == "" {
		httpx.WriteError(w, h.opts.Logger, r, service.BadRequest(service.CodeBadRequest, "digest is required: the digest of the call you were shown"))
		return
	}
	a, err := h.eng.Decide(r.Context(), r.PathValue("id"), d.Decision, d.Digest, p.ID)
	switch {
	case err == nil:
	case h.opts.IsNotFound != nil && h.opts.IsNotFound(err):
		httpx.WriteError(w, h.opts.Logger, r, &service.Error{Code: service.CodeNotFound, Status: http.StatusNotFound, Message: "no such approval", Err: err})
		return
	case h.opts.IsForbidden != nil && h.opts.IsForbidden(err):
		httpx.WriteError(w, h.opts.Logger, r, &service.Error{Code: service.CodeForbidden, Status: http.StatusForbidden, Message: "you may not decide this call", Err: err})
		return
	case h.opts.IsConflict != nil && h.opts.IsConflict(err):
		httpx.WriteError(w, h.opts.Logger, r, &service.Error{Code: "stale", Status: http.StatusConflict, Message: "the call changed or was already decided: look at it again", Err: err})
		return
	default:
		httpx.WriteError(w, h.opts.Logger, r, err)
		return
	}
	// The run goes on under its own principal, whoever approved it.
	kind := "token"
	if strings.HasPrefix(a.Principal, "local:") {
		kind = "local"
	}
	runID, err := h.svc.Start(context.WithoutCancel(r.Context()), service.Principal{ID: a.Principal, Kind: kind},
		&service.StartRequest{Graph: a.Graph, ResumeRunID: a.RunID})
	resp := map[string]any{"approval": a, "run_id": a.RunID}
	if err != nil {
		h.opts.Logger.Error("run not resumed after a decision", "run_id", a.RunID, "approval", a.ID, "error", err.Error())
		resp["resumed"] = false
	} else {
		resp["resumed"], resp["run_id"] = true, runID
	}
	b, _ := json.Marshal(resp)
	httpx.WriteJSON(w, http.StatusOK, b)
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
