package a2a

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	bhttp "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
)

// Agent kinds this package registers.
const (
	Kind      = "a2a"
	KindHTTPS = "a2a+https"
	KindHTTP  = "a2a+http"
)

// Options configures the adapter. Nil means the defaults.
type Options struct {
	// Egress is the base policy of every connection: TLS roots, timeouts,
	// body cap, resolver, proxy. Its Allowlist, AnyPublicHost and
	// AllowPrivate are ignored: those are always the node's.
	Egress *egress.Options
	// PollInterval is the first wait between GetTask polls (default
	// 100ms); each wait doubles, up to MaxPollInterval (default 2s).
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// CancelTimeout bounds the CancelTask sent when a call's context ends
	// before its task does (default 2s).
	CancelTimeout time.Duration
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.PollInterval <= 0 {
		v.PollInterval = 100 * time.Millisecond
	}
	if v.MaxPollInterval <= 0 {
		v.MaxPollInterval = 2 * time.Second
	}
	if v.MaxPollInterval < v.PollInterval {
		v.MaxPollInterval = v.PollInterval
	}
	if v.CancelTimeout <= 0 {
		v.CancelTimeout = 2 * time.Second
	}
	return v
}

// Config says how to reach one remote agent.
type Config struct {
	// URL is the agent's base URL; its card is read from
	// URL/.well-known/agent-card.json.
	URL string
	// Stream chooses SendStreamingMessage (true) or SendMessage and
	// polling (false); nil follows the card's capabilities.streaming.
	Stream *bool
	// Egress lists the hosts the agent may be reached at (the card's
	// endpoints included); nil means the URL's host alone.
	Egress []string
	// AllowPrivate opts one private "ip:port" in (an agent on loopback or
	// the local network).
	AllowPrivate []string
	// Headers and Auth are added to every request, as in the http adapter:
	// a secret goes in as {{secret:NAME}} or through Auth, and its value is
	// read from the call's secrets when the request is made.
	Headers map[string]string
	Auth    *bhttp.Auth
	// Secrets is the node's declared secrets: list, which every secret
	// Headers and Auth name must be on; nil (the Go API) accepts any name,
	// and the card declares the ones used.
	Secrets []string
	// Options configures the adapter; nil means the defaults.
	Options *Options
}

func (c *Config) check() error {
	if c == nil || c.URL == "" {
		return fmt.Errorf("no url: give the agent's base URL (its card is at URL/.well-known/agent-card.json)")
	}
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
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("url %s: a base URL has no query or fragment", redact(u))
	}
	return nil
}

func redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	return v.String()
}

// configKeys are the keys a topology may give an a2a agent.
var configKeys = []string{"auth", "headers", "stream", "url"}

// ConfigFromRef reads a node's agent reference: the short forms
// "a2a+https://host/" and "a2a+http://127.0.0.1:8080/" (graph.ParseRef cuts
// them at the first ':', leaving "//host/" as the target), or the map form
// {a2a: {url, stream}}, with the node's `with:` merged in and its egress
// and allow_private declarations. It never connects.
func ConfigFromRef(ref graph.Ref, opts *Options) (*Config, error) {
	cfg := &Config{Options: opts}
	for k := range ref.Config {
		if !slices.Contains(configKeys, k) {
			return nil, fmt.Errorf("unknown key %q (want %s)", k, strings.Join(configKeys, ", "))
		}
	}
	if v, ok := ref.Config["url"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("url: want a string, not %T", v)
		}
		cfg.URL = s
	}
	if v, ok := ref.Config["stream"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("stream: want true or false, not %T", v)
		}
		cfg.Stream = &b
	}
	if v, ok := ref.Config["headers"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("headers: want a map of header names to values, not %T", v)
		}
		cfg.Headers = make(map[string]string, len(m))
		for k, hv := range m {
			s, ok := hv.(string)
			if !ok {
				return nil, fmt.Errorf("headers: %s: want a string, not %T", k, hv)
			}
			cfg.Headers[k] = s
		}
	}
	if v, ok := ref.Config["auth"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("auth: want {bearer: SECRET} or {header: NAME, secret: SECRET}, not %T", v)
		}
		cfg.Auth = &bhttp.Auth{}
		if err := bhttp.DecodeConfig(m, cfg.Auth); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	target := strings.TrimSpace(ref.Target)
	switch ref.Kind {
	case KindHTTPS, KindHTTP:
		if !strings.HasPrefix(target, "//") {
			return nil, fmt.Errorf("want %s://host/", ref.Kind)
		}
		if cfg.URL != "" {
			return nil, fmt.Errorf("the url is given twice (in the short form and in url)")
		}
		cfg.URL = strings.TrimPrefix(ref.Kind, "a2a+") + ":" + target
	case Kind:
		if target != "" {
			if cfg.URL != "" {
				return nil, fmt.Errorf("the url is given twice")
			}
			cfg.URL = target
		}
	default:
		return nil, fmt.Errorf("kind %q is not an a2a kind", ref.Kind)
	}
	if n := ref.Node; n != nil {
		cfg.Egress = slices.Clone(n.Egress)
		cfg.AllowPrivate = slices.Clone(n.AllowPrivate)
		cfg.Secrets = slices.Clone(n.Secrets)
		if cfg.Secrets == nil {
			cfg.Secrets = []string{} // a node that declares none may use none
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Register adds the a2a kinds to r: "a2a" (map form), "a2a+https" and
// "a2a+http" (short forms). The factories never connect: the agent's card
// is read when the node runs.
func Register(r *graph.Registry, opts *Options) {
	f := func(ref graph.Ref) (agent.Agent, error) {
		cfg, err := ConfigFromRef(ref, opts)
		if err != nil {
			return nil, err
		}
		return New(cfg)
	}
	for _, k := range []string{Kind, KindHTTPS, KindHTTP} {
		r.Register(k, f)
	}
}
