// Package admin holds the operator's doors of `babel serve`: the global
// kill switch (POST /v1/kill). Only a principal the policy grants "kill"
// may use it; the decision is the engine's, which records it in the audit
// log before it acts.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/babelagent/babel/serve/internal/httpx"
	"github.com/babelagent/babel/serve/service"
)

// Killer engages or releases the kill switch on behalf of a principal.
type Killer interface {
	Kill(ctx context.Context, by string, engage bool) error
}

// KillHandler serves POST /v1/kill with {"engage": true|false}. forbidden
// reports the killer's refusals by policy (403).
func KillHandler(k Killer, forbidden func(error) bool, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := service.PrincipalFrom(r.Context())
		if !ok {
			httpx.WriteError(w, log, r, &service.Error{Code: service.CodeUnauthorized, Status: http.StatusUnauthorized, Message: "no principal"})
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			httpx.WriteError(w, log, r, err)
			return
		}
		var req struct {
			Engage *bool `json:"engage"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Engage == nil {
			httpx.WriteError(w, log, r, service.BadRequest(service.CodeInvalidJSON, `the body must be {"engage": true} or {"engage": false}`))
			return
		}
		if err := k.Kill(context.WithoutCancel(r.Context()), p.ID, *req.Engage); err != nil {
			if forbidden != nil && forbidden(err) {
				httpx.WriteError(w, log, r, &service.Error{Code: service.CodeForbidden, Status: http.StatusForbidden, Message: "you may not use the kill switch", Err: err})
				return
			}
			httpx.WriteError(w, log, r, &service.Error{Code: service.CodeInternal, Status: http.StatusInternalServerError, Message: "the kill switch could not be set", Err: errors.Unwrap(err)})
			return
		}
		state := "released"
		if *req.Engage {
			state = "engaged"
		}
		b, _ := json.Marshal(map[string]string{"kill_switch": state})
		httpx.WriteJSON(w, http.StatusOK, b)
	})
}
