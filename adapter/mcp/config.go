package mcp

import (
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	bhttp "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
)

// Options configures the adapter. Nil means the defaults.
type Options struct {
	// Starter starts stdio servers. Nil means a SandboxStarter with the
	// default os sandbox: each server confined by bubblewrap, and no server
	// at all where bubblewrap cannot start.
	Starter Starter
	// Egress is the base policy of the HTTP transport: TLS roots, timeouts,
	// body cap, resolver, proxy. Its Allowlist, AnyPublicHost and
	// AllowPrivate are ignored: those are always the node's.
	Egress *egress.Options
	// Stderr receives the standard error of stdio servers; nil discards
	// it. It must be safe for concurrent use.
	Stderr io.Writer
}

// Config says how to reach one MCP server and which tool list to trust.
// Exactly one of URL and Command is set.
type Config struct {
	// URL is a streamable HTTP endpoint ("https://tools.example.com/mcp").
	URL string
	// Command is the absolute path of a stdio server; Args its arguments.
	// The program is never looked up in PATH or the working directory, and
	// runs in the os sandbox (see SandboxStarter).
	Command string
	Args    []string
	// Pin is the digest of the server's tool list ("sha256:<64 hex>"), as
	// Pin returns it. Agents refuse to call a server whose list differs.
	Pin string
	// Egress lists the hosts the HTTP transport may reach; nil means the
	// URL's host alone.
	Egress []string
	// AllowPrivate opts one private "ip:port" in (a server on loopback or
	// the local network).
	AllowPrivate []string
	// Headers and Auth are added to every HTTP request (URL only), as in
	// the http adapter: a secret goes in as {{secret:NAME}} or through
	// Auth, and its value is read from the call's secrets when the request
	// is made.
	Headers map[string]string
	Auth    *bhttp.Auth
	// Secrets is the node's declared secrets: list, which every secret
	// Headers and Auth name must be on; nil (the Go API) accepts any name,
	// and the card declares the ones used.
	Secrets []string
	// Options configures the adapter; nil means the defaults.
	Options *Options
}

var pinPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// checkPin reports whether p is a well-formed pin.
func checkPin(p string) error {
	if !pinPattern.MatchString(p) {
		return fmt.Errorf("pin %q: want sha256: followed by 64 lowercase hex digits, as mcp.Pin prints it", p)
	}
	return nil
}

// check validates c without touching the network or the file system.
func (c *Config) check() error {
	switch {
	case c == nil:
		return fmt.Errorf("no server configuration")
	case c.URL != "" && c.Command != "":
		return fmt.Errorf("give a url or a command, not both")
	case c.URL == "" && c.Command == "":
		return fmt.Errorf("no server: give a url (streamable HTTP) or a command (stdio)")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil {
			return fmt.Errorf("url: not a valid URL")
		}
		switch {
		case u.Scheme != "https" && u.Scheme != "http":
			return fmt.Errorf("url %s: scheme must be https or http", redact(u))
		case u.Hostname() == "":
			return fmt.Errorf("url %s: no host", redact(u))
		case u.User != nil:
			return fmt.Errorf("url %s: credentials do not belong in a URL; declare a secret instead", redact(u))
		}
		if len(c.Args) > 0 {
			return fmt.Errorf("args apply to a stdio command, not to a url")
		}
		return nil
	}
	if strings.ContainsRune(c.Command, 0) || !filepath.IsAbs(c.Command) || filepath.Clean(c.Command) != c.Command {
		return fmt.Errorf("command %q: want a clean absolute path (a program is never looked up in PATH or the working directory)", c.Command)
	}
	for i, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("args[%d] holds a NUL byte", i)
		}
	}
	if len(c.Egress) > 0 || len(c.AllowPrivate) > 0 {
		// A stdio server has no network at all (its sandbox has none);
		// these would suggest a guard that does not apply.
		return fmt.Errorf("egress and allow_private apply to a url, not to a stdio command")
	}
	if len(c.Headers) > 0 || c.Auth != nil {
		return fmt.Errorf("headers and auth apply to a url; a stdio server gets the node's secrets as environment variables")
	}
	return nil
}

// label is how the server is named in errors: the URL without userinfo,
// query or fragment, or the command's path.
func (c *Config) label() string {
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err == nil {
			return redact(u)
		}
		return "(invalid url)"
	}
	return c.Command
}

func redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	return v.String()
}

// configKeys are the keys a topology may give an mcp agent.
var configKeys = []string{"args", "auth", "command", "headers", "pin", "tool", "url"}

// ConfigFromRef reads a node's agent reference: the short forms
// "mcp+stdio:/path/to/server --flag" (split at white space, no shell
// quoting: use the map form's args for an argument with spaces),
// "mcp+https://host/mcp" and
// "mcp+http://127.0.0.1:8080/mcp" (graph.ParseRef cuts them at the first
// ':', leaving "//host/mcp" as the target), or the map form
// {mcp: {url | command, args, tool, pin}}, with the node's `with:` merged
// in and its egress and allow_private declarations. It returns the server's
// configuration and the tool the node calls (either may lack a pin or a
// tool: the CLI reads a node this way to compute its pin). It never
// connects.
func ConfigFromRef(ref graph.Ref, opts *Options) (*Config, string, error) {
	cfg := &Config{Options: opts}
	for k := range ref.Config {
		if !slices.Contains(configKeys, k) {
			return nil, "", fmt.Errorf("unknown key %q (want %s)", k, strings.Join(configKeys, ", "))
		}
	}
	str := func(key string) (string, error) {
		v, ok := ref.Config[key]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: want a string, not %T", key, v)
		}
		return s, nil
	}
	var err error
	if cfg.URL, err = str("url"); err != nil {
		return nil, "", err
	}
	if cfg.Command, err = str("command"); err != nil {
		return nil, "", err
	}
	if cfg.Pin, err = str("pin"); err != nil {
		return nil, "", err
	}
	tool, err := str("tool")
	if err != nil {
		return nil, "", err
	}
	if v, ok := ref.Config["headers"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("headers: want a map of header names to values, not %T", v)
		}
		cfg.Headers = make(map[string]string, len(m))
		for k, hv := range m {
			s, ok := hv.(string)
			if !ok {
				return nil, "", fmt.Errorf("headers: %s: want a string, not %T", k, hv)
			}
			cfg.Headers[k] = s
		}
	}
	if v, ok := ref.Config["auth"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("auth: want {bearer: SECRET} or {header: NAME, secret: SECRET}, not %T", v)
		}
		cfg.Auth = &bhttp.Auth{}
		if err := bhttp.DecodeConfig(m, cfg.Auth); err != nil {
			return nil, "", fmt.Errorf("auth: %w", err)
		}
	}
	if v, ok := ref.Config["args"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, "", fmt.Errorf("args: want a list of strings, not %T", v)
		}
		for i, a := range list {
			s, ok := a.(string)
			if !ok {
				return nil, "", fmt.Errorf("args[%d]: want a string, not %T", i, a)
			}
			cfg.Args = append(cfg.Args, s)
		}
	}

	target := strings.TrimSpace(ref.Target)
	switch ref.Kind {
	case KindStdio:
		if target == "" {
			return nil, "", fmt.Errorf("want mcp+stdio:/absolute/path/to/server [args...]")
		}
		if cfg.URL != "" || cfg.Command != "" {
			return nil, "", fmt.Errorf("the server is given twice (in the short form and in url/command)")
		}
		fields := strings.Fields(target)
		cfg.Command = fields[0]
		cfg.Args = append(fields[1:], cfg.Args...)
	case KindHTTPS, KindHTTP:
		if !strings.HasPrefix(target, "//") {
			return nil, "", fmt.Errorf("want %s://host/path", ref.Kind)
		}
		if cfg.URL != "" || cfg.Command != "" {
			return nil, "", fmt.Errorf("the server is given twice (in the short form and in url/command)")
		}
		cfg.URL = strings.TrimPrefix(ref.Kind, "mcp+") + ":" + target
	case Kind:
		if target != "" {
			if cfg.URL != "" || cfg.Command != "" {
				return nil, "", fmt.Errorf("the server is given twice (as a string and in url/command)")
			}
			if strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") {
				cfg.URL = target
			} else {
				fields := strings.Fields(target)
				cfg.Command, cfg.Args = fields[0], append(fields[1:], cfg.Args...)
			}
		}
	default:
		return nil, "", fmt.Errorf("kind %q is not an mcp kind", ref.Kind)
	}
	if n := ref.Node; n != nil {
		if cfg.URL != "" {
			cfg.Egress = slices.Clone(n.Egress)
			cfg.AllowPrivate = slices.Clone(n.AllowPrivate)
		}
		cfg.Secrets = slices.Clone(n.Secrets)
		if cfg.Secrets == nil {
			cfg.Secrets = []string{} // a node that declares none may use none
		}
	}
	if err := cfg.check(); err != nil {
		return nil, "", err
	}
	if cfg.Pin != "" {
		if err := checkPin(cfg.Pin); err != nil {
			return nil, "", err
		}
	}
	return cfg, tool, nil
}

// requireToolAndPin is what a node needs beyond a reachable server.
func requireToolAndPin(cfg *Config, tool string) error {
	if tool == "" {
		return fmt.Errorf("no tool: say which tool of %s the node calls (with: {tool: NAME})", cfg.label())
	}
	if cfg.Pin == "" {
		return fmt.Errorf("no pin: the tools of %s are not trusted until pinned; review them with `babel mcp pin` (or mcp.Pin) and set pin: \"sha256:...\"", cfg.label())
	}
	return nil
}

// Agent kinds this package registers.
const (
	Kind      = "mcp"
	KindStdio = "mcp+stdio"
	KindHTTPS = "mcp+https"
	KindHTTP  = "mcp+http"
)

// Register adds the mcp kinds to r: "mcp" (map form), "mcp+stdio",
// "mcp+https" and "mcp+http" (short forms). The factories never connect:
// a server is reached only when a node runs.
func Register(r *graph.Registry, opts *Options) {
	f := func(ref graph.Ref) (agent.Agent, error) {
		cfg, tool, err := ConfigFromRef(ref, opts)
		if err != nil {
			return nil, err
		}
		if err := requireToolAndPin(cfg, tool); err != nil {
			return nil, err
		}
		return New(cfg, tool)
	}
	for _, k := range []string{Kind, KindStdio, KindHTTPS, KindHTTP} {
		r.Register(k, f)
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
