package serve

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/serve/service"
)

// DefaultListen is where `babel serve` listens unless told otherwise:
// loopback only.
const DefaultListen = "127.0.0.1:7077"

// Config is the server's configuration, from an explicit --config file
// (YAML or JSON) and flags. Nothing is read from the working directory
// unless its path is given. Zero fields take the defaults; no field can
// switch a protection off.
type Config struct {
	// Listen is the address to bind (default 127.0.0.1:7077). A
	// non-loopback address needs a token file.
	Listen string `json:"listen,omitempty"`
	// TokenFile holds "PRINCIPAL TOKEN" lines; see LoadTokens.
	TokenFile string `json:"token_file,omitempty"`
	// AllowedHosts are extra Host header values (host or host:port) to
	// accept. On a loopback bind only loopback names with the bound port are
	// accepted besides these; on another bind, when set, only these are.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// AllowedOrigins are browser origins (scheme://host:port) that may call
	// the server besides its own.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// PublicURL is the base URL the A2A agent card gives; default http://HOST.
	PublicURL string `json:"public_url,omitempty"`

	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// MaxConcurrentRuns bounds runs in flight (default 256); past it: 503.
	MaxConcurrentRuns int `json:"max_concurrent_runs,omitempty"`
	// RatePerPrincipal and Burst bound how fast one principal starts runs
	// (default 50/s, burst 100); past them: 429.
	RatePerPrincipal float64 `json:"rate_per_principal,omitempty"`
	Burst            int     `json:"burst,omitempty"`
	// RunDeadline is the ceiling on a run's duration (default 5m); a
	// caller's deadline_s can only lower it.
	RunDeadline graph.Duration `json:"run_deadline,omitempty"`
	// History is how many finished runs are kept in memory (default 10,000).
	History int `json:"history,omitempty"`
	// MaxOutputBytes and MaxOutputDepth bound a run's output in responses
	// (default 4 MiB and 64 levels).
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	MaxOutputDepth int `json:"max_output_depth,omitempty"`

	// Timeouts of the HTTP server.
	ReadHeaderTimeout graph.Duration `json:"read_header_timeout,omitempty"` // default 5s
	ReadTimeout       graph.Duration `json:"read_timeout,omitempty"`        // default 30s
	WriteTimeout      graph.Duration `json:"write_timeout,omitempty"`       // default 30s, per write for streams
	IdleTimeout       graph.Duration `json:"idle_timeout,omitempty"`        // default 120s
}

// LoadConfig reads the "serve:" section of the operator's configuration
// file at path (YAML or JSON; the other sections are the engine's). A file
// without the section gives the defaults. Unknown keys in the section are
// errors.
func LoadConfig(path string) (*Config, error) {
	data, err := readSmallFile(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return &c, nil
	}
	var top map[string]any
	if err := yaml.UnmarshalWithOptions(data, &top, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("config %s: %s", path, yaml.FormatError(err, false, true))
	}
	sec, ok := top["serve"]
	if !ok || sec == nil {
		return &c, nil
	}
	raw, err := json.Marshal(sec)
	if err != nil {
		return nil, fmt.Errorf("config %s: serve: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config %s: serve: %w", path, err)
	}
	return &c, nil
}

func (c *Config) withDefaults() Config {
	o := *c
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	def := func(d *graph.Duration, v time.Duration) {
		if *d <= 0 {
			*d = graph.Duration(v)
		}
	}
	def(&o.ReadHeaderTimeout, 5*time.Second)
	def(&o.ReadTimeout, 30*time.Second)
	def(&o.WriteTimeout, 30*time.Second)
	def(&o.IdleTimeout, 120*time.Second)
	if o.RunDeadline <= 0 {
		o.RunDeadline = graph.Duration(service.DefaultRunDeadline)
	}
	return o
}

func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", path, max)
	}
	return b, nil
}

// Tokens maps bearer tokens to principals. Lookup compares in constant
// time against every token, so neither a token's value nor which one
// matched shows in the timing.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum       [sha256.Size]byte
	principal service.Principal
}

// MinTokenLength is the shortest token accepted.
const MinTokenLength = 16

// NewTokens returns a token table from principal names to tokens.
func NewTokens(byPrincipal map[string]string) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]bool{}
	for name, tok := range byPrincipal {
		if err := checkPrincipalName(name); err != nil {
			return nil, err
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("the token of %s is shorter than %d characters", name, MinTokenLength)
		}
		sum := sha256.Sum256([]byte(tok))
		if seen[sum] {
			return nil, fmt.Errorf("the token of %s is also another principal's token", name)
		}
		seen[sum] = true
		t.entries = append(t.entries, tokenEntry{sum: sum, principal: service.Principal{ID: "token:" + name, Kind: "token"}})
	}
	return t, nil
}

func checkPrincipalName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("principal name %q: 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r)) {
			return fmt.Errorf("principal name %q: use letters, digits, '.', '_', '@' and '-'", name)
		}
	}
	return nil
}

// Principals lists the principals that have a token.
func (t *Tokens) Principals() []string {
	if t == nil {
		return nil
	}
	out := make([]string, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.principal.ID
	}
	return out
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Lookup returns the principal whose token is tok.
func (t *Tokens) Lookup(tok string) (service.Principal, bool) {
	if t == nil || tok == "" {
		return service.Principal{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return service.Principal{}, false
	}
	return t.entries[found].principal, true
}

// LoadTokens reads a token file: one "PRINCIPAL TOKEN" pair per line,
// blank lines and lines starting with # ignored. Each token maps to the
// principal "token:PRINCIPAL". The file must not be readable by group or
// others, since it holds credentials.
func LoadTokens(path string) (*Tokens, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("token file %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := readSmallFile(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("token file %s line %d: want \"PRINCIPAL TOKEN\"", path, n)
		}
		if _, dup := m[f[0]]; dup {
			return nil, fmt.Errorf("token file %s line %d: principal %s has two tokens", path, n, f[0])
		}
		m[f[0]] = f[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(m) == 0 {
		return nil, errors.New("token file " + path + " holds no token")
	}
	t, err := NewTokens(m)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}
