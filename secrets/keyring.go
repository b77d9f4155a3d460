package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KeyringOptions configures a Keyring. A nil *KeyringOptions means the
// defaults.
type KeyringOptions struct {
	// Binary is the absolute path of secret-tool. Empty means search the
	// absolute directories of PATH in the environment snapshot.
	Binary string
	// Service is the value of the "service" attribute the secrets are stored
	// under. Empty means "babel". The secret name is the "username"
	// attribute, which is the layout Python's keyring library uses too:
	//
	//	secret-tool store --label='babel OPENAI_API_KEY' service babel username OPENAI_API_KEY
	Service string
	// Timeout bounds one lookup. Zero means 5 seconds.
	Timeout time.Duration
}

const keyringMaxOutput = 64 << 10

// Keyring is a Source over the OS keyring (the freedesktop Secret Service)
// through the secret-tool program. When secret-tool is missing or cannot
// reach a keyring, Lookup returns an *UnavailableError saying why.
//
// secret-tool runs with a fixed argv and an explicit environment holding
// only the session-bus variables from the snapshot, never the process's own.
type Keyring struct {
	binary  string
	missing error
	service string
	timeout time.Duration
	env     []string
}

// NewKeyring returns a Keyring. environ is the environment snapshot (as
// given to NewEnv) from which PATH and the session-bus variables are taken.
func NewKeyring(environ []string, opts *KeyringOptions) *Keyring {
	if opts == nil {
		opts = &KeyringOptions{}
	}
	k := &Keyring{service: opts.Service, timeout: opts.Timeout}
	if k.service == "" {
		k.service = "babel"
	}
	if k.timeout <= 0 {
		k.timeout = 5 * time.Second
	}
	vars := make(map[string]string)
	for _, kv := range environ {
		if key, v, ok := strings.Cut(kv, "="); ok {
			vars[key] = v
		}
	}
	// This is all of the environment secret-tool gets: what it needs to find
	// the session bus, and nothing else.
	for _, name := range [...]string{"DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "HOME", "DISPLAY"} {
		if v, ok := vars[name]; ok {
			k.env = append(k.env, name+"="+v)
		}
	}
	k.env = append(k.env, "LC_ALL=C")
	switch {
	case opts.Binary != "" && !filepath.IsAbs(opts.Binary):
		k.missing = fmt.Errorf("secret-tool path %q is not absolute", opts.Binary)
	case opts.Binary != "":
		k.binary = opts.Binary
	default:
		k.binary, k.missing = findInPath("secret-tool", vars["PATH"])
	}
	return k
}

// findInPath looks for an executable named file in the absolute directories
// of path. Relative entries (".", "") are skipped: nothing is run from the
// working directory because of where it lies.
func findInPath(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH (install libsecret-tools to use the OS keyring)", file)
}

// Available returns nil when secret-tool was found, or why not.
func (k *Keyring) Available() error {
	if k.missing != nil {
		return &UnavailableError{Source: "keyring", Reason: k.missing.Error(), Err: k.missing}
	}
	return nil
}

// Lookup asks the keyring for the secret named name.
func (k *Keyring) Lookup(ctx context.Context, name string) (Secret, error) {
	if err := CheckName(name); err != nil {
		return Secret{}, err
	}
	if err := k.Available(); err != nil {
		return Secret{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	var stdout, stderr cappedBuffer
	stdout.max, stderr.max = keyringMaxOutput, 4<<10
	cmd := exec.CommandContext(ctx, k.binary, "lookup", "service", k.service, "username", name)
	cmd.Env = k.env
	cmd.Dir = "/"
	cmd.Stdin = nil
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Secret{}, &UnavailableError{Source: "keyring", Reason: "secret-tool did not answer in time", Err: ctxErr}
	}
	if stdout.over {
		return Secret{}, fmt.Errorf("keyring: secret %s is larger than %d bytes", name, keyringMaxOutput)
	}
	if msg := firstLine(stderr.String()); msg != "" {
		return Secret{}, &UnavailableError{Source: "keyring", Reason: "secret-tool: " + msg, Err: err}
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return Secret{}, &UnavailableError{Source: "keyring", Reason: "cannot run secret-tool", Err: err}
	}
	// secret-tool exits 1 with nothing on stderr when the item is absent.
	v := strings.TrimSuffix(stdout.String(), "\n")
	if err != nil || v == "" {
		return Secret{}, &NotFoundError{Name: name, Source: k.String()}
	}
	return New(name, v), nil
}

func (k *Keyring) String() string { return "keyring" }

// firstLine is a short, printable summary of a tool's stderr.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// cappedBuffer keeps at most max bytes and remembers whether more came.
type cappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

var _ Source = (*Keyring)(nil)
