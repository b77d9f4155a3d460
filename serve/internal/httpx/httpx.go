// Package httpx holds the HTTP plumbing the doors of `babel serve` share:
// the error body every door writes, JSON responses, and a response writer
// that keeps a long response's write deadline moving.
//
// It must never write an internal error message to a response: only the
// stable code and safe message of a service.Error, and a correlation id
// that points at the server's log line.
package httpx

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/babelagent/babel/serve/service"
)

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is what a caller learns about an error.
type ErrorInfo struct {
	Code          service.Code `json:"code"`
	Message       string       `json:"message"`
	CorrelationID string       `json:"correlation_id"`
}

// WriteError writes err as a sanitized error response: a service.Error's
// status, code and message; anything else as a 500 whose cause goes only
// to log, under the correlation id the caller is given.
func WriteError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) {
	e := service.AsError(err)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		e = &service.Error{Code: service.CodeBodyTooLarge, Status: http.StatusRequestEntityTooLarge,
			Message: "the request body is over the " + strconv.FormatInt(mbe.Limit, 10) + "-byte limit"}
	}
	id := service.NewCorrelationID()
	if e.Status >= 500 && e.Code != service.CodeBusy && e.Code != service.CodeShuttingDown && log != nil {
		msg := "<nil>"
		if e.Err != nil {
			msg = e.Err.Error()
		}
		log.Error("request failed", "correlation_id", id, "method", r.Method, "path", r.URL.Path, "error", msg)
	} else if e.Err != nil && log != nil {
		log.Info("request refused", "correlation_id", id, "code", string(e.Code), "cause", e.Err.Error())
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="babel"`)
	}
	w.Header().Set("X-Correlation-Id", id)
	b, _ := json.Marshal(ErrorBody{Error: ErrorInfo{Code: e.Code, Message: e.Message, CorrelationID: id}})
	WriteJSON(w, e.Status, b)
}

// WriteJSON writes b as a JSON response with status.
func WriteJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write(newline)
}

var newline = []byte{'\n'}

// SlidingWriter extends the connection's write deadline by Timeout before
// each write and flush, so a long stream (SSE, MCP, A2A) is bounded by how
// long each write may take rather than by the whole response.
type SlidingWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	Timeout time.Duration
	last    time.Time
}

// NewSlidingWriter wraps w.
func NewSlidingWriter(w http.ResponseWriter, timeout time.Duration) *SlidingWriter {
	return &SlidingWriter{ResponseWriter: w, rc: http.NewResponseController(w), Timeout: timeout}
}

func (s *SlidingWriter) extend() {
	now := time.Now()
	if now.Sub(s.last) < time.Second {
		return
	}
	s.last = now
	_ = s.rc.SetWriteDeadline(now.Add(s.Timeout))
}

func (s *SlidingWriter) Write(b []byte) (int, error) {
	s.extend()
	return s.ResponseWriter.Write(b)
}

func (s *SlidingWriter) WriteHeader(code int) {
	s.extend()
	s.ResponseWriter.WriteHeader(code)
}

// Flush flushes the response, extending the deadline first.
func (s *SlidingWriter) Flush() {
	s.extend()
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *SlidingWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
