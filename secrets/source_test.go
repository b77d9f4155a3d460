package secrets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnvSeesOnlyTheSnapshotAndOnlyAskedNames(t *testing.T) {
	t.Setenv("BABEL_TEST_CANARY", "live-process-canary")
	env := NewEnv([]string{"KEY_A=alpha-value", "KEY_B=beta-value", "EMPTY=", "KEY_A=alpha-later", "junk"})
	ctx := context.Background()

	s, err := env.Lookup(ctx, "KEY_A")
	if err != nil || s.Reveal() != "alpha-later" || s.Name() != "KEY_A" {
		t.Fatalf("Lookup(KEY_A) = %q, %v", s.Reveal(), err)
	}
	for _, name := range []string{"BABEL_TEST_CANARY", "EMPTY", "PATH"} {
		_, err := env.Lookup(ctx, name)
		var nf *NotFoundError
		if !errors.As(err, &nf) || nf.Name != name {
			t.Errorf("Lookup(%s) = %v, want *NotFoundError", name, err)
		}
	}
	if _, err := env.Lookup(ctx, "BAD-NAME"); err == nil {
		t.Error("invalid name accepted")
	}
}

func writeFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFileReadsKeyValueAndJSON(t *testing.T) {
	ctx := context.Background()
	kv := writeFile(t, "# comment\n\nexport A_KEY=\"line\\none\"\nB_KEY = 'lit#\\n' \nC_KEY=plain#value\r\n", 0o600)
	js := writeFile(t, `{"A_KEY": "from-json", "B_KEY": "x\"y"}`, 0o400)
	for _, tt := range []struct {
		path, name, want string
	}{
		{kv, "A_KEY", "line\none"}, {kv, "B_KEY", `lit#\n`}, {kv, "C_KEY", "plain#value"},
		{js, "A_KEY", "from-json"}, {js, "B_KEY", `x"y`},
	} {
		s, err := NewFile(tt.path).Lookup(ctx, tt.name)
		if err != nil || s.Reveal() != tt.want {
			t.Errorf("%s %s = %q, %v; want %q", filepath.Base(tt.path), tt.name, s.Reveal(), err, tt.want)
		}
	}
	_, err := NewFile(kv).Lookup(ctx, "MISSING")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), kv) {
		t.Fatalf("missing key: %v", err)
	}
}

func TestFileRefusesLoosePermissions(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o700, 0o666} {
		p := writeFile(t, "A_KEY=value-value\n", mode)
		_, err := NewFile(p).Lookup(context.Background(), "A_KEY")
		var ie *InsecureFileError
		if !errors.As(err, &ie) {
			t.Fatalf("mode %#o: %v, want *InsecureFileError", mode, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, p) || !strings.Contains(msg, fmt.Sprintf("mode %#o", mode)) ||
			!strings.Contains(msg, "0600") || strings.Contains(msg, "value-value") {
			t.Fatalf("mode %#o: error should name path and mode, not the value: %s", mode, msg)
		}
	}
}

func TestFileRefusesAFileOwnedBySomeoneElse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file away")
	}
	p := writeFile(t, "A_KEY=value-value\n", 0o600)
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Skip(err)
	}
	_, err := NewFile(p).Lookup(context.Background(), "A_KEY")
	var ie *InsecureFileError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("foreign-owned file: %v", err)
	}
}

func TestFileRefusesNonRegularFiles(t *testing.T) {
	_, err := NewFile(t.TempDir()).Lookup(context.Background(), "A_KEY")
	var ie *InsecureFileError
	if !errors.As(err, &ie) {
		t.Fatalf("directory: %v", err)
	}
}

func TestFileParseErrorsNameTheLineNotTheValue(t *testing.T) {
	for content, want := range map[string]string{
		"A_KEY=ok-value\nS3CR3T-without-equals-sign\n": "line 2",
		"A_KEY=one\nA_KEY=two\n":                       "line 2: duplicate key A_KEY",
		"1BAD=S3CR3T-value\n":                          "line 1: invalid key",
		"S3CR3T+/x==\n":                                "line 1: invalid key",
		`{"S3CR3T+x": "v"}`:                            "invalid key",
		"A_KEY=\"unterminated-S3CR3T\n":                "line 1: key A_KEY: unterminated",
		`{"A_KEY": 12345678}`:                          "key A_KEY: value must be a string",
		"{\n\"A_KEY\": \"S3CR3T-value\",\n}":           "line 3: malformed JSON",
	} {
		p := writeFile(t, content, 0o600)
		_, err := NewFile(p).Lookup(context.Background(), "A_KEY")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: got %v, want it to mention %q and the path", content, err, want)
			continue
		}
		for _, leak := range []string{"S3CR3T", "12345678", "ok-value"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%q: error leaks %q: %v", content, leak, err)
			}
		}
	}
}

type failingSource struct{ err error }

func (f failingSource) Lookup(context.Context, string) (Secret, error) { return Secret{}, f.err }

func TestChainTakesTheFirstThatHasIt(t *testing.T) {
	ctx := context.Background()
	unavailable := NewKeyring(nil, nil)
	chain := Chain{unavailable, NewEnv([]string{"A_KEY=from-env"}), NewEnv([]string{"A_KEY=later", "B_KEY=from-second"})}
	if s, err := chain.Lookup(ctx, "A_KEY"); err != nil || s.Reveal() != "from-env" {
		t.Fatalf("A_KEY = %q, %v", s.Reveal(), err)
	}
	if s, err := chain.Lookup(ctx, "B_KEY"); err != nil || s.Reveal() != "from-second" {
		t.Fatalf("B_KEY = %q, %v", s.Reveal(), err)
	}
	_, err := chain.Lookup(ctx, "C_KEY")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "keyring (unavailable)") {
		t.Fatalf("C_KEY: %v", err)
	}
	loose := writeFile(t, "A_KEY=x-value\n", 0o644)
	_, err = Chain{NewFile(loose), NewEnv([]string{"A_KEY=fallback"})}.Lookup(ctx, "A_KEY")
	var ie *InsecureFileError
	if !errors.As(err, &ie) {
		t.Fatalf("a broken source must stop the chain, got %v", err)
	}
	boom := errors.New("boom")
	if _, err := (Chain{failingSource{boom}}).Lookup(ctx, "A_KEY"); !errors.Is(err, boom) {
		t.Fatalf("source error lost: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := chain.Lookup(cctx, "A_KEY"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lookup: %v", err)
	}
}

func TestKeyringReportsMissingSecretTool(t *testing.T) {
	k := NewKeyring([]string{"PATH=" + t.TempDir() + ":.:relative/bin"}, nil)
	_, err := k.Lookup(context.Background(), "A_KEY")
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "secret-tool not found") {
		t.Fatalf("got %v", err)
	}
	if k.Available() == nil {
		t.Fatal("Available() = nil without secret-tool")
	}
	_, err = NewKeyring(nil, &KeyringOptions{Binary: "secret-tool"}).Lookup(context.Background(), "A_KEY")
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "not absolute") {
		t.Fatalf("relative binary: %v", err)
	}
}

// fakeSecretTool stands in for libsecret's secret-tool. It fails loudly if
// it can see anything of the environment but the session-bus variables.
const fakeSecretTool = `#!/bin/sh
if [ -n "$BABEL_TEST_CANARY" ] || [ -n "$PATH_LEAK" ]; then echo "saw the canary" >&2; exit 3; fi
[ "$1 $2 $3 $4" = "lookup service babel username" ] || { echo "bad argv: $*" >&2; exit 2; }
case "$5" in
  KEY_A) printf 'keyring-value-a\n' ;;
  BROKEN) echo "Cannot autolaunch D-Bus without X11 \$DISPLAY" >&2; exit 1 ;;
  SLOW) sleep 5 ;;
  *) exit 1 ;;
esac
`

func TestKeyringWithSecretTool(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret-tool"), []byte(fakeSecretTool), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BABEL_TEST_CANARY", "live-process-canary")
	environ := []string{"PATH=" + dir, "BABEL_TEST_CANARY=snapshot-canary", "PATH_LEAK=1", "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent"}
	k := NewKeyring(environ, &KeyringOptions{Timeout: 500 * time.Millisecond})
	ctx := context.Background()

	s, err := k.Lookup(ctx, "KEY_A")
	if err != nil || s.Reveal() != "keyring-value-a" {
		t.Fatalf("KEY_A = %q, %v", s.Reveal(), err)
	}
	var nf *NotFoundError
	if _, err := k.Lookup(ctx, "KEY_B"); !errors.As(err, &nf) {
		t.Fatalf("KEY_B: %v", err)
	}
	var ue *UnavailableError
	if _, err := k.Lookup(ctx, "BROKEN"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "D-Bus") {
		t.Fatalf("BROKEN: %v", err)
	}
	if _, err := k.Lookup(ctx, "SLOW"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "in time") {
		t.Fatalf("SLOW: %v", err)
	}
}
