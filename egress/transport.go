package egress

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// guardedTransport checks each request's URL before the inner transport
// sees it and caps each response body.
type guardedTransport struct {
	c    *Client
	next *http.Transport
}

func (g *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("egress: request has no url")
	}
	if err := g.c.checkURL(req.URL); err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	capped := newCappedBody(resp.Body, g.c.maxBody, resp.ContentLength)
	if w, ok := resp.Body.(io.Writer); ok {
		resp.Body = cappedRWBody{cappedBody: capped, w: w}
	} else {
		resp.Body = capped
	}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// inner transport.
func (g *guardedTransport) CloseIdleConnections() { g.next.CloseIdleConnections() }

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// checkRedirect refuses redirects unless the client follows them, and then
// checks each hop like a first request.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	refuse := func(reason string) error {
		return &PolicyError{URL: redactURL(req.URL), Host: strings.ToLower(req.URL.Hostname()), Reason: reason}
	}
	switch {
	case c.follow == 0:
		return refuse("redirect not followed")
	case len(via) > c.follow:
		return refuse("more than " + strconv.Itoa(c.follow) + " redirects")
	case len(via) > 0 && via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https":
		return refuse("redirect from https to " + req.URL.Scheme)
	}
	return c.checkURL(req.URL)
}

var _ http.RoundTripper = (*guardedTransport)(nil)
