package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// Exchange sends req with c and maps the outcome:
//
//   - a 2xx response becomes a Message (see ResponseMessage) whose metadata
//     "http" holds the status and content type;
//   - any other status is an *agent.PeerError carrying the status, retryable
//     for 408, 425, 429 and 5xx (but 501); the peer's body is discarded,
//     never quoted;
//   - an egress refusal is returned as is (errors.As finds the
//     *egress.PolicyError), never retryable;
//   - a body over the client's cap is a non-retryable *agent.PeerError
//     wrapping the *egress.LimitError;
//   - a cancelled or expired context is returned wrapped, so errors.Is finds it;
//   - any other failure (refused, reset, timed out) is a retryable
//     *agent.PeerError.
//
// peer names the other side in errors ("http api.example.com").
func Exchange(c *egress.Client, peer string, req *http.Request) (agent.Message, error) {
	// The request's bytes count against the run's egress budget before
	// they leave; the response's once they are read.
	if err := agent.ChargeEgress(req.Context(), max(req.ContentLength, 0)+int64(len(req.URL.String()))); err != nil {
		return agent.Message{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return agent.Message{}, RequestError(req.Context(), peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		return agent.Message{}, StatusError(peer, resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return agent.Message{}, RequestError(req.Context(), peer, err)
	}
	if err := agent.ChargeEgress(req.Context(), int64(len(body))); err != nil {
		return agent.Message{}, err
	}
	return ResponseMessage(peer, resp.StatusCode, resp.Header.Get("Content-Type"), body)
}

// StatusError is the error for a response status outside 2xx.
func StatusError(peer string, status int) *agent.PeerError {
	retry := status == http.StatusRequestTimeout || status == http.StatusTooEarly ||
		status == http.StatusTooManyRequests || (status >= 500 && status <= 599 && status != http.StatusNotImplemented)
	msg := fmt.Sprintf("HTTP %d", status)
	if t := http.StatusText(status); t != "" {
		msg += " " + t
	}
	return agent.NewPeerError(peer, status, retry, msg, nil)
}

// RequestError classifies a failure to get a response (see Exchange).
func RequestError(ctx context.Context, peer string, err error) error {
	var pe *egress.PolicyError
	var le *egress.LimitError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", peer, pe)
	case errors.As(err, &le):
		return agent.NewPeerError(peer, 0, false, le.Error(), le)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: request abandoned: %w", peer, context.Cause(ctx))
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		cause = ue.Err // the url.Error's own text repeats the method and URL
	}
	return agent.NewPeerError(peer, 0, true, "request failed: "+cause.Error(), err)
}

// ResponseMessage maps a successful response body to a Message: JSON
// (application/json or any +json type) becomes a data part and must be
// valid; text/* and other textual types become a text part; an empty body
// an empty text part; anything else a file part of the body's bytes. With
// no content type, a valid JSON object or array is data and valid UTF-8 is
// text.
func ResponseMessage(peer string, status int, contentType string, body []byte) (agent.Message, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	mt = strings.ToLower(mt)
	var m agent.Message
	switch {
	case len(body) == 0:
		m = agent.Text("")
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if !json.Valid(body) {
			return agent.Message{}, agent.NewPeerError(peer, status, false, "response says "+mt+" but is not valid JSON", nil)
		}
		m = agent.JSON(body)
	case textual(mt) && utf8.Valid(body):
		m = agent.Text(string(body))
	case mt == "":
		if t := firstByte(body); (t == '{' || t == '[') && json.Valid(body) {
			m = agent.JSON(body)
		} else if utf8.Valid(body) {
			m = agent.Text(string(body))
		} else {
			m = agent.Message{Parts: []agent.Part{{Kind: agent.PartFile, File: &agent.File{MediaType: "application/octet-stream", Bytes: body}}}}
		}
	default:
		m = agent.Message{Parts: []agent.Part{{Kind: agent.PartFile, File: &agent.File{MediaType: mt, Bytes: body}}}}
	}
	m.Metadata = map[string]any{"http": map[string]any{"status": status, "content_type": mt}}
	return m, nil
}

func textual(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/xml", "application/javascript", "application/x-www-form-urlencoded", "application/yaml", "application/x-yaml", "application/x-ndjson":
		return true
	}
	return false
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
