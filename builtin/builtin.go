// Package builtin holds the agents that need no network, key or sandbox:
// trim, upper, lower, echo, merge, template, jsonpath, sleep and fail. They
// make offline graphs, demos and tests possible. None has an effect.
package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/internal/jsonpath"
)

// fn is a builtin agent made of a function.
type fn struct {
	card agent.Card
	run  func(ctx context.Context, in agent.Message) (agent.Message, error)
}

func (f *fn) Card() agent.Card { return f.card }
func (f *fn) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	return f.run(ctx, in)
}

func newFn(name, desc string, run func(context.Context, agent.Message) (agent.Message, error)) agent.Agent {
	return &fn{card: agent.Card{Name: "builtin:" + name, Description: desc, Kind: "builtin"}, run: run}
}

// Trim removes leading and trailing white space from the input text.
func Trim() agent.Agent {
	return newFn("trim", "Trim white space from the text.", func(_ context.Context, in agent.Message) (agent.Message, error) {
		return agent.Text(strings.TrimSpace(in.Text())), nil
	})
}

// Upper upper-cases the input text.
func Upper() agent.Agent {
	return newFn("upper", "Upper-case the text.", func(_ context.Context, in agent.Message) (agent.Message, error) {
		return agent.Text(strings.ToUpper(in.Text())), nil
	})
}

// Lower lower-cases the input text.
func Lower() agent.Agent {
	return newFn("lower", "Lower-case the text.", func(_ context.Context, in agent.Message) (agent.Message, error) {
		return agent.Text(strings.ToLower(in.Text())), nil
	})
}

// Echo returns its input unchanged.
func Echo() agent.Agent {
	return newFn("echo", "Return the input unchanged.", func(_ context.Context, in agent.Message) (agent.Message, error) {
		return agent.Message{Parts: in.Parts, Metadata: in.Metadata}, nil
	})
}

// Merge combines a join's input (an object keyed by upstream names): texts
// are joined by blank lines in upstream order; objects are merged key by key
// (a later upstream wins); other values stay under their upstream's name.
func Merge() agent.Agent {
	return newFn("merge", "Combine the outputs of a join.", func(_ context.Context, in agent.Message) (agent.Message, error) {
		raw, err := in.Value()
		if err != nil {
			return agent.Message{}, &agent.InputError{Agent: "builtin:merge", Reason: err.Error()}
		}
		keys, vals, err := orderedObject(raw)
		if err != nil {
			return agent.FromJSON(raw), nil // not a join: pass through
		}
		allText := len(vals) > 0
		for _, v := range vals {
			if len(v) == 0 || v[0] != '"' {
				allText = false
			}
		}
		if allText {
			parts := make([]string, len(vals))
			for i, v := range vals {
				_ = json.Unmarshal(v, &parts[i])
			}
			return agent.Text(strings.Join(parts, "\n\n")), nil
		}
		out := map[string]json.RawMessage{}
		for i, v := range vals {
			var m map[string]json.RawMessage
			if len(v) > 0 && v[0] == '{' && json.Unmarshal(v, &m) == nil {
				for k, x := range m {
					out[k] = x
				}
				continue
			}
			out[keys[i]] = v
		}
		return agent.Data(out)
	})
}

// orderedObject splits a JSON object into its keys and values in order.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("not an object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, nil
}

// maxTemplateOutput bounds what a template may produce.
const maxTemplateOutput = 1 << 20

// Template renders a Go text/template. The data is {{.input}} (the input
// text) and {{.data}} (the input decoded as JSON, when it is JSON).
func Template(text string) (agent.Agent, error) {
	t, err := template.New("node").Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	return newFn("template", "Render a text template.", func(_ context.Context, in agent.Message) (agent.Message, error) {
		data := map[string]any{"input": in.Text()}
		if v, err := in.Any(); err == nil {
			data["data"] = v
		}
		var b limitedBuffer
		if err := t.Execute(&b, data); err != nil {
			return agent.Message{}, &agent.InputError{Agent: "builtin:template", Reason: err.Error()}
		}
		return agent.Text(b.String()), nil
	}), nil
}

// templateFuncs are the only functions a template may call: pure string
// helpers, nothing that reads files, the network or the environment.
var templateFuncs = template.FuncMap{
	"contains":  strings.Contains,
	"hasPrefix": strings.HasPrefix,
	"hasSuffix": strings.HasSuffix,
	"lower":     strings.ToLower,
	"upper":     strings.ToUpper,
	"trim":      strings.TrimSpace,
	"replace":   strings.ReplaceAll,
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

type limitedBuffer struct{ bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.Len()+len(p) > maxTemplateOutput {
		return 0, fmt.Errorf("template output exceeds %d bytes", maxTemplateOutput)
	}
	return l.Buffer.Write(p)
}

// JSONPath picks the value at path out of the input.
func JSONPath(path string) (agent.Agent, error) {
	p, err := jsonpath.Compile(path)
	if err != nil {
		return nil, err
	}
	return newFn("jsonpath", "Select a value with "+path+".", func(_ context.Context, in agent.Message) (agent.Message, error) {
		v, err := in.Any()
		if err != nil {
			return agent.Message{}, &agent.InputError{Agent: "builtin:jsonpath", Reason: "input is not JSON"}
		}
		got, ok := p.Get(v)
		if !ok {
			return agent.Message{}, &agent.InputError{Agent: "builtin:jsonpath", Field: path, Reason: "no value at this path"}
		}
		if s, ok := got.(string); ok {
			return agent.Text(s), nil
		}
		return agent.Data(got)
	}), nil
}

// Sleep waits d, then returns its input. With ignoreContext it does not
// stop when cancelled: a misbehaving agent, for tests of deadlines.
func Sleep(d time.Duration, ignoreContext bool) agent.Agent {
	return newFn("sleep", "Wait, then return the input.", func(ctx context.Context, in agent.Message) (agent.Message, error) {
		if ignoreContext {
			time.Sleep(d)
			return in, nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return agent.Message{Parts: in.Parts}, nil
		case <-ctx.Done():
			return agent.Message{}, ctx.Err()
		}
	})
}

// Fail always fails with message; retryable says whether a retry may help.
func Fail(message string, retryable bool) agent.Agent {
	return newFn("fail", "Always fail.", func(context.Context, agent.Message) (agent.Message, error) {
		return agent.Message{}, agent.NewPeerError("builtin:fail", 0, retryable, message, nil)
	})
}

// Register adds the builtin kind to r: "builtin:NAME" with the node's
// `with:` (or the map form's keys) as configuration.
func Register(r *graph.Registry) {
	r.Register("builtin", func(ref graph.Ref) (agent.Agent, error) {
		name := ref.Target
		if name == "" {
			name, _ = ref.Config["name"].(string)
		}
		cfg := config(ref.Config)
		switch name {
		case "trim":
			return Trim(), cfg.none()
		case "upper":
			return Upper(), cfg.none()
		case "lower":
			return Lower(), cfg.none()
		case "echo":
			return Echo(), cfg.none()
		case "merge":
			return Merge(), cfg.none()
		case "template":
			text, err := cfg.str("text", true)
			if err != nil {
				return nil, err
			}
			if err := cfg.none("text"); err != nil {
				return nil, err
			}
			return Template(text)
		case "jsonpath":
			p, err := cfg.str("path", true)
			if err != nil {
				return nil, err
			}
			if err := cfg.none("path"); err != nil {
				return nil, err
			}
			return JSONPath(p)
		case "sleep":
			ds, err := cfg.str("duration", false)
			if err != nil {
				return nil, err
			}
			d := time.Second
			if ds != "" {
				if d, err = time.ParseDuration(ds); err != nil || d < 0 {
					return nil, fmt.Errorf("sleep: duration %q: want a Go duration such as 2s", ds)
				}
			}
			ignore, _ := cfg["ignore_context"].(bool)
			return Sleep(d, ignore), cfg.none("duration", "ignore_context")
		case "fail":
			msg, _ := cfg.str("message", false)
			if msg == "" {
				msg = "failed on purpose"
			}
			retry, _ := cfg["retryable"].(bool)
			return Fail(msg, retry), cfg.none("message", "retryable")
		case "":
			return nil, errors.New("builtin: no name given (for example builtin:trim)")
		}
		return nil, fmt.Errorf("unknown builtin %q (known: %s)", name, strings.Join(Names(), ", "))
	})
}

// Names lists the builtins.
func Names() []string {
	return []string{"echo", "fail", "jsonpath", "lower", "merge", "sleep", "template", "trim", "upper"}
}

type config map[string]any

func (c config) str(key string, required bool) (string, error) {
	v, ok := c[key]
	if !ok {
		if required {
			return "", fmt.Errorf("missing %q in with:", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%q must be a string", key)
	}
	return s, nil
}

// none reports configuration keys the builtin does not take.
func (c config) none(allowed ...string) error {
	var extra []string
	for k := range c {
		if k == "name" {
			continue
		}
		found := false
		for _, a := range allowed {
			found = found || a == k
		}
		if !found {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("unknown setting(s) %s", strings.Join(extra, ", "))
	}
	return nil
}
