package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// canary is awkward on purpose: JSON escapes its quote, backslash and '<',
// URL encoding its space and slash.
const canary = `cAn4ry"<x>\q/ 9Zk` + "\u00e9-END"

func TestCanaryNeverSurvivesRedaction(t *testing.T) {
	r := NewRedactor()
	r.Register(canary)

	escaped, _ := json.Marshal(canary)
	doc, _ := json.Marshal(map[string]any{
		"output": "the key is " + canary + " ok",
		"nested": []any{map[string]string{"v": canary}},
		canary:   1,
	})
	var logBuf bytes.Buffer
	log := slog.New(NewRedactingHandler(slog.NewJSONHandler(&logBuf, nil), r))
	log.Info("saw "+canary, "err", fmt.Errorf("wrap: %w", errors.New(canary)))

	cases := map[string]string{
		"plain":           r.Redact("a " + canary + " b " + canary),
		"bytes":           string(r.RedactBytes([]byte("x" + canary + "x"))),
		"json text":       r.Redact(string(escaped)),
		"url":             r.Redact("https://h/?k=" + url.QueryEscape(canary)),
		"RedactJSON":      string(r.RedactJSON(doc)),
		"RedactJSON json": string(r.RedactJSON(escaped)),
		"error":           r.RedactError(fmt.Errorf("calling: %w", errors.New(canary))).Error(),
		"slog":            logBuf.String(),
	}
	for name, out := range cases {
		if strings.Contains(out, canary) || strings.Contains(out, "cAn4ry") {
			t.Errorf("%s: canary survived: %s", name, out)
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%s: no %s in %s", name, Redacted, out)
		}
	}
	if !json.Valid(r.RedactJSON(doc)) {
		t.Errorf("RedactJSON broke the document: %s", r.RedactJSON(doc))
	}
}

func TestRedactErrorKeepsTheChain(t *testing.T) {
	r := NewRedactor()
	r.Register(canary)
	sentinel := errors.New("sentinel")
	err := r.RedactError(fmt.Errorf("key %s: %w", canary, sentinel))
	if !errors.Is(err, sentinel) || strings.Contains(err.Error(), canary) {
		t.Fatalf("RedactError: %v (is sentinel: %v)", err, errors.Is(err, sentinel))
	}
	clean := errors.New("nothing here")
	if r.RedactError(clean) != clean || r.RedactError(nil) != nil {
		t.Fatal("RedactError wrapped an error that needed nothing")
	}
}

func TestPatternsRedactCredentialShapes(t *testing.T) {
	tests := []struct {
		name, in, secret string
	}{
		{"aws key id", "id=AKIAIOSFODNN7EXAMPLE ok", "AKIAIOSFODNN7EXAMPLE"},
		{"aws session key id", "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"},
		{"aws secret", `aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{"aws secret env", `AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{"openai", "key sk-proj-Abc123def456GHI789jkl0 used", "sk-proj-Abc123def456GHI789jkl0"},
		{"openai classic", "sk-abcdefghijklmnopqrstuvwxyz012345", "sk-abcdefghijklmnopqrstuvwxyz012345"},
		{"anthropic", "x-api-key: sk-ant-api03-AbCdEf_GhIjKlMnOpQrStUv-wxyz0123", "sk-ant-api03-AbCdEf_GhIjKlMnOpQrStUv-wxyz0123"},
		{"stripe", "sk_live_51HabcdefGHIJKLmnop", "sk_live_51HabcdefGHIJKLmnop"},
		{"github classic", "token ghp_16C7e42F292c6912E7710c838347Ae178B4a done", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
		{"github oauth", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a"},
		{"github server", "ghs_16C7e42F292c6912E7710c838347Ae178B4a", "ghs_16C7e42F292c6912E7710c838347Ae178B4a"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"},
		{"slack bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"},
		{"slack user", "xoxp-123456789012-abcdef", "xoxp-123456789012-abcdef"},
		{"jwt", "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U;", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
		{"google", "key=AIzaSyD-1234567890abcdefghijklmnopqrstu&x", "AIzaSyD-1234567890abcdefghijklmnopqrstu"},
		{"pem", "k: -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY----- tail", "MIIEowIBAAKCAQEA"},
		{"pem openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA"},
		{"pem escaped in json", `{"key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n"}`, "MIIEvQIBADANBg"},
		{"pem truncated", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg", "MHcCAQEEIBkg"},
		{"authorization bearer", "Authorization: Bearer abc.def-123", "abc.def-123"},
		{"authorization basic", "authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"},
		{"authorization raw", "AUTHORIZATION=opaque-token-42", "opaque-token-42"},
		{"authorization go header", "map[Authorization:[Bearer tok_live_77] Accept:[*/*]]", "tok_live_77"},
		{"authorization json", `{"Authorization": "Bearer s3cr3t-tok"}`, "s3cr3t-tok"},
		{"authorization escaped json", `"{\"authorization\":\"Bearer s3cr3t-tok\"}"`, "s3cr3t-tok"},
		{"proxy authorization", "Proxy-Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"},
		{"bearer alone", "using Bearer 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"},
		{"basic alone", "header Basic YWxhZGRpbjpvcGVuc2VzYW1l sent", "YWxhZGRpbjpvcGVuc2VzYW1l"},
		{"url password", "dial postgres://app:hunter2secret@db.internal:5432/x failed", "hunter2secret"},
	}
	var r *Redactor // patterns work without registration, even on nil
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := r.Redact(tt.in)
			if strings.Contains(out, tt.secret) || !strings.Contains(out, Redacted) {
				t.Fatalf("Redact(%q) = %q", tt.in, out)
			}
			if b := r.RedactBytes([]byte(tt.in)); string(b) != out {
				t.Fatalf("RedactBytes = %q, Redact = %q", b, out)
			}
			if again := r.Redact(out); again != out {
				t.Fatalf("redacting twice changed %q into %q", out, again)
			}
		})
	}
}

func TestPatternsLeaveProseAlone(t *testing.T) {
	for _, in := range []string{
		"Basic usage: run the task-force meeting at 10:00.",
		"the bearer of this letter; bearer tokens are explained below",
		"authorization failed for user alice",
		"risk-assessment-for-the-quarterly-plan",
		"see https://example.com/path@v2 and mailto:someone@example.com",
		"AKIA is a prefix; ASIA is a continent",
		"ghp_ alone, sk- alone, xoxb- alone, eyJ alone",
		"an_underscore_heavy_identifier_name and A-Z",
	} {
		if out := (*Redactor)(nil).Redact(in); out != in {
			t.Errorf("Redact(%q) = %q, want unchanged", in, out)
		}
	}
}

func TestRegisterIgnoresShortValues(t *testing.T) {
	r := NewRedactor()
	r.Register("admin", "", "12345")
	in := "admin logged in with 12345"
	if out := r.Redact(in); out != in {
		t.Fatalf("short values were redacted: %q", out)
	}
	r.Register("admin1")
	if out := r.Redact(in + " admin1"); out != "admin logged in with 12345 "+Redacted {
		t.Fatalf("six-byte value not redacted: %q", out)
	}
}

func TestRedactMergesOverlaps(t *testing.T) {
	r := NewRedactor()
	r.Register("abcdefgh", "efghijkl")
	if out := r.Redact("x abcdefghijkl y"); out != "x "+Redacted+" y" {
		t.Fatalf("overlapping values: %q", out)
	}
}

func TestRedactCleanReturnsInputWithoutAllocating(t *testing.T) {
	r := NewRedactor()
	in := strings.Repeat("2025-01-02T03:04:05Z INFO node=clean status=ok duration_ms=12 ", 16)
	b := []byte(in)
	check := func(label string) {
		if out := r.Redact(in); unsafe.StringData(out) != unsafe.StringData(in) {
			t.Fatalf("%s: Redact copied clean input", label)
		}
		if out := r.RedactBytes(b); &out[0] != &b[0] {
			t.Fatalf("%s: RedactBytes copied clean input", label)
		}
		if n := testing.AllocsPerRun(100, func() { _ = r.Redact(in); _ = r.RedactBytes(b) }); n != 0 {
			t.Fatalf("%s: %v allocations on clean input", label, n)
		}
	}
	check("nothing registered")
	r.Register("sk-TEST-5f3c0000aaaabbbb", "another-secret-value")
	check("values registered")
}

func TestRedactorIsSafeForConcurrentUse(t *testing.T) {
	r := NewRedactor()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := fmt.Sprintf("value-%d-%d-secret", g, i)
				r.Register(v)
				if out := r.Redact("x " + v + " y"); strings.Contains(out, v) {
					t.Errorf("registered value survived: %q", out)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestRedactJSON(t *testing.T) {
	r := NewRedactor()
	r.Register("hunter2hunter2", "31415926535")
	tests := []struct{ name, in, want string }{
		{"clean is untouched", `{"b": 1, "a": [true, null, "x"]}`, `{"b": 1, "a": [true, null, "x"]}`},
		{"value in string", `{"b":"pw hunter2hunter2!","a":2}`, `{"b":"pw [REDACTED]!","a":2}`},
		{"escaped value", `["hunter2\u0068unter2"]`, `["[REDACTED]"]`},
		{"number value", `{"pin": 31415926535, "n": -1.5e3}`, `{"pin": "[REDACTED]", "n": -1.5e3}`},
		{"sensitive keys", `{"password":"pw","Authorization":"Bearer x","X-Api-Key":7,"max_tokens":5,"token":"t"}`,
			`{"password":"[REDACTED]","Authorization":"[REDACTED]","X-Api-Key":"[REDACTED]","max_tokens":5,"token":"t"}`},
		{"sensitive key with object", `{"secret":{"kind":"x"},"after":"y"}`, `{"secret":{"kind":"x"},"after":"y"}`},
		{"key holding a secret", `{"hunter2hunter2":1}`, `{"[REDACTED]":1}`},
		{"pattern across structure", `{"a":"-----BEGIN PRIVATE KEY-----","b":"x"}`, `{"a":"[REDACTED]","b":"x"}`},
		{"top-level string", `"AKIAIOSFODNN7EXAMPLE"`, `"[REDACTED]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := r.RedactJSON(json.RawMessage(tt.in))
			if string(out) != tt.want {
				t.Fatalf("RedactJSON(%s)\n got %s\nwant %s", tt.in, out, tt.want)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON out: %s", out)
			}
		})
	}
	if in := json.RawMessage(`{"a":"b"}`); &r.RedactJSON(in)[0] != &in[0] {
		t.Fatal("clean JSON was copied")
	}
	if out := r.RedactJSON(json.RawMessage(`{"broken": "hunter2hunter2`)); strings.Contains(string(out), "hunter2hunter2") {
		t.Fatalf("invalid JSON not redacted as text: %s", out)
	}
}

// FuzzRedactRemovesCanary: a registered value never survives, wherever it
// sits and whatever surrounds it.
func FuzzRedactRemovesCanary(f *testing.F) {
	f.Add("prefix ", " suffix")
	f.Add("sk-", "AKIA")
	f.Add(`{"a":"`, `"}`)
	const c = "Zq9canaryV4lue"
	r := NewRedactor()
	r.Register(c)
	f.Fuzz(func(t *testing.T, a, b string) {
		in := a + c + b
		if out := r.Redact(in); strings.Contains(out, c) {
			t.Fatalf("canary survived in %q", out)
		}
		doc, _ := json.Marshal(map[string]string{a: in, "k": b + c})
		out := r.RedactJSON(doc)
		if !json.Valid(out) {
			t.Fatalf("RedactJSON broke %s into %s", doc, out)
		}
		var m map[string]string
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			if strings.Contains(k, c) || strings.Contains(v, c) {
				t.Fatalf("canary survived RedactJSON: %s", out)
			}
		}
	})
}

// FuzzRedactJSONKeepsValidity: valid JSON in, valid JSON out.
func FuzzRedactJSONKeepsValidity(f *testing.F) {
	for _, s := range []string{`{}`, `[1,"a",{"password":2}]`, `"\u0041KIAIOSFODNN7EXAMPLE"`, `{"Authorization":"Basic YTpi"}`, `-0.5e-3`} {
		f.Add(s)
	}
	r := NewRedactor()
	r.Register("123456", "secret-value")
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		if out := r.RedactJSON(json.RawMessage(s)); !json.Valid(out) {
			t.Fatalf("RedactJSON(%s) = %s, invalid", s, out)
		}
	})
}

// FuzzRedactJSONQuickPathAgrees: the one-pass shortcut changes nothing.
func FuzzRedactJSONQuickPathAgrees(f *testing.F) {
	for _, s := range []string{`{}`, `[1,"a",{"password":2}]`, `{"k":"sk-abcdefghijklmnopqrstu"}`, `{"pass-word":"x","n":123456}`,
		`{"Authorization":"Basic YTpi"}`, `["AKIAIOSFODNN7EXAMPLE",{"x":"eyJhbGciOi.eyJzdWIiOi.abc"}]`, `{"aws_secret_access_key":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`,
		`{"a":"ghp_abcdefghijklmnopqrstuvwxyz0123","b":"xoxb-1234567890-abc"}`, `{"authorization":"Bearer abc.def"}`} {
		f.Add(s)
	}
	r := NewRedactor()
	r.Register("123456", "secret-value")
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		quick, long := r.redactJSON(json.RawMessage(s), true), r.redactJSON(json.RawMessage(s), false)
		if string(quick) != string(long) {
			t.Fatalf("RedactJSON(%s): quick path %s, long way %s", s, quick, long)
		}
	})
}
