package egress

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestVectorCopiesMatchShared keeps testdata/ in step with the project's
// shared vectors when those are present (developer machines, CI's copy
// beside the clone).
func TestVectorCopiesMatchShared(t *testing.T) {
	checked := 0
	for _, dir := range []string{"/work/shared/vectors", filepath.Join("..", "..", "shared", "vectors")} {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		for _, name := range []string{"ssrf-blocked.txt", "ssrf-allowed.txt"} {
			want, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("testdata/%s differs from %s: copy it again", name, filepath.Join(dir, name))
			}
			checked++
		}
	}
	if checked == 0 {
		t.Skip("no shared vectors directory here")
	}
}

// TestBlockedVectorsNeverReachAListener sends every blocked vector, aimed
// at a live loopback listener, through every entry point, with clients
// whose allowlist names the host and whose resolver answers loopback for
// any name; nothing may connect.
func TestBlockedVectorsNeverReachAListener(t *testing.T) {
	w := newWitness(t)
	resolver := &fixedResolver{addrs: []string{"127.0.0.1"}}
	for _, raw := range readVectors(t, "ssrf-blocked.txt") {
		t.Run(raw, func(t *testing.T) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			aimed := *u
			if u.Host != "" {
				aimed.Host = net.JoinHostPort(u.Hostname(), w.port())
			}
			var allow []string
			if u.Hostname() != "" {
				allow = []string{u.Hostname()}
			}
			clients := map[string]*Options{
				"allowlist names host": {Allowlist: allow, Resolver: resolver, FollowRedirects: 3},
				"any public host":      {AnyPublicHost: true, Resolver: resolver},
			}
			for name, o := range clients {
				c := mustNew(t, o)
				for _, target := range []string{raw, aimed.String()} {
					pe := asPolicy(t, c.Check(target), name+": Check "+target)
					if pe.Reason == "host not in allowlist" {
						t.Errorf("%s: %s refused only by the allowlist", name, target)
					}
					req, err := http.NewRequest(http.MethodGet, target, nil)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := c.Do(req)
					if resp != nil {
						resp.Body.Close()
					}
					asPolicy(t, err, name+": Do "+target)
				}
				if u.Host != "" {
					conn, err := c.DialContext(context.Background(), "tcp", aimed.Host)
					if conn != nil {
						conn.Close()
					}
					asPolicy(t, err, name+": DialContext "+aimed.Host)
				}
			}
		})
	}
	if n := w.settle(t); n != 0 {
		t.Fatalf("%d connections reached the loopback listener", n)
	}
}

func TestAllowedVectorsPassTheDecision(t *testing.T) {
	for _, raw := range readVectors(t, "ssrf-allowed.txt") {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		for name, o := range map[string]*Options{
			"any public host":      {AnyPublicHost: true},
			"allowlist names host": {Allowlist: []string{u.Hostname()}},
		} {
			if err := mustNew(t, o).Check(raw); err != nil {
				t.Errorf("%s: Check(%s) = %v, want nil", name, raw, err)
			}
		}
		pe := asPolicy(t, mustNew(t, nil).Check(raw), "default client")
		if pe.Reason != "host not in allowlist" {
			t.Errorf("default client refused %s for %q, want the allowlist", raw, pe.Reason)
		}
	}
}
