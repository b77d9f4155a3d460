package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// Register adds the kinds "http" and "https" to r:
//
//	agent: {http: {url: "https://api.example.com/v1/x", method: GET}}
//	agent: {http: "https://api.example.com/v1/x"}
//	agent: https://api.example.com/v1/x     # a POST; settings may come from with:
//	agent: http://api.example.com/v1/x
//
// opts may be nil.
func Register(r *graph.Registry, opts *Options) {
	if opts == nil {
		opts = &Options{}
	}
	f := func(ref graph.Ref) (agent.Agent, error) { return FromRef(ref, opts) }
	r.Register("http", f)
	r.Register("https", f)
}

// FromRef builds the agent a topology node refers to.
func FromRef(ref graph.Ref, opts *Options) (agent.Agent, error) {
	if opts == nil {
		opts = &Options{}
	}
	var cfg Config
	if err := DecodeConfig(ref.Config, &cfg); err != nil {
		return nil, err
	}
	if ref.Target != "" {
		target := ref.Target
		if strings.HasPrefix(target, "//") { // the short form: kind "https", target "//host/path"
			target = ref.Kind + ":" + target
		}
		if cfg.URL != "" {
			return nil, fmt.Errorf("the url is given twice (%s and url:)", ref.Kind)
		}
		cfg.URL = target
	}
	return build(cfg, opts, ref.Node)
}

// DecodeConfig decodes an agent's configuration map into dst (a pointer to
// a struct with json tags), refusing settings dst does not have and naming
// them.
func DecodeConfig(m map[string]any, dst any) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("unknown setting %s", f)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("setting %s: want %s, got %s", te.Field, te.Type.String(), te.Value)
		}
		return fmt.Errorf("configuration: %s", strings.TrimPrefix(msg, "json: "))
	}
	return nil
}
