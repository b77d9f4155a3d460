package http_test

import (
	"net/url"
	"strings"
	"testing"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
)

// FuzzQuery: any input either becomes a query string that round-trips or
// is refused with an input error; it never panics.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{`{"q":"x","n":1,"tags":["a",2,true],"skip":null}`, `{"a":{"b":1}}`, `[1]`, `"text"`, `null`, `{"v":"2"}`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := httpadapter.Query("fuzz", agent.JSON([]byte(raw)), url.Values{"v": {"1"}})
		if err != nil {
			return
		}
		if q == nil {
			return
		}
		back, perr := url.ParseQuery(q.Encode())
		if perr != nil || back.Get("v") != "1" {
			t.Fatalf("%s: query %q does not round-trip (%v)", raw, q.Encode(), perr)
		}
	})
}

// FuzzResponseMessage: any body under any content type maps to a valid
// message or a peer error.
func FuzzResponseMessage(f *testing.F) {
	for _, s := range [][2]string{{"application/json", `{"a":1}`}, {"application/json", `{`}, {"text/plain; charset=utf-8", "hi"}, {"", "\xff\xfe"}, {"image/png", "\x89PNG"}, {"a/b; x=\"", "[]"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ctype, body string) {
		m, err := httpadapter.ResponseMessage("http fuzz", 200, ctype, []byte(body))
		if err != nil {
			if !strings.Contains(err.Error(), "not valid JSON") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if verr := m.Validate(); verr != nil && len(body) > 0 {
			t.Fatalf("%q %q: invalid message: %v", ctype, body, verr)
		}
	})
}
