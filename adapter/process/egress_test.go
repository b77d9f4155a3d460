package process_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/babelagent/babel/adapter/process"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
)

// fetcher is a message program that fetches the URLs its message's text
// lists, through the environment's proxy, and answers what each gave.
const fetcher = `#!/usr/bin/python3 -I
import json, sys, urllib.request, urllib.error
msg = json.load(sys.stdin)
got = []
for u in msg["parts"][0]["text"].split():
    try:
        with urllib.request.urlopen(u, timeout=10) as r:
            got.append(r.read().decode())
    except urllib.error.HTTPError as e:
        got.append("HTTP %d" % e.code)
    except Exception as e:
        got.append("error")
json.dump({"parts": [{"kind": "text", "text": " ".join(got)}], "labels": []}, sys.stdout)
`

func TestProcessAgentReachesOnlyItsDeclaredEgress(t *testing.T) {
	srv := func(body string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
		t.Cleanup(s.Close)
		return s
	}
	declared, undeclared := srv("declared"), srv("undeclared")
	prog := writeProgram(t, fetcher)
	urls := declared.URL + " " + undeclared.URL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	a, err := process.New("fetch", prog, &process.Options{Egress: &egress.Options{
		Allowlist: []string{"127.0.0.1"}, AllowPrivate: []string{egress.AllowPrivateURL(declared.URL)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Card(); !c.Has(agent.EffectEgress) || !slices.Equal(c.Egress, []string{"127.0.0.1"}) {
		t.Errorf("card %+v: want the egress effect and the allowlist", c)
	}
	out, err := a.Run(ctx, agent.Text(urls))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Text(); got != "declared HTTP 403" {
		t.Errorf("with egress: %q, want the declared body and a refusal", got)
	}

	// Without egress the program has no network at all.
	a, err = process.New("fetch", prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err = a.Run(ctx, agent.Text(urls))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Text(); got != "error error" || strings.Contains(got, "declared") {
		t.Errorf("without egress: %q, want both unreachable", got)
	}
}
