package secrets_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/secrets"
)

const secretValue = "sv-7f3c9e1d-canary-value"

type holder struct {
	Name string
	Key  secrets.Secret
	key  secrets.Secret // unexported: fmt cannot call its methods
}

type keyError struct{ Key secrets.Secret }

func (e keyError) Error() string { return fmt.Sprintf("bad key %v", e.Key) }

func TestSecretNeverRendersItsValue(t *testing.T) {
	s := secrets.New("API_KEY", secretValue)
	h := holder{Name: "h", Key: s, key: s}
	renderings := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%p", "%10.3s"} {
		renderings["Secret "+verb] = fmt.Sprintf(verb, s)
		renderings["*Secret "+verb] = fmt.Sprintf(verb, &s)
		renderings["struct "+verb] = fmt.Sprintf(verb, h)
		renderings["*struct "+verb] = fmt.Sprintf(verb, &h)
		renderings["slice "+verb] = fmt.Sprintf(verb, []secrets.Secret{s})
		renderings["map "+verb] = fmt.Sprintf(verb, map[string]secrets.Secret{"k": s})
	}
	// The per-call set a node receives prints no value either.
	set := agent.NewSecrets(s)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		renderings["agent.Secrets "+verb] = fmt.Sprintf(verb, set)
		renderings["agent.Secrets* "+verb] = fmt.Sprintf(verb, *set)
	}
	renderings["Sprint"] = fmt.Sprint(s, h)
	renderings["Sprintln"] = fmt.Sprintln(s, &h)

	for name, v := range map[string]any{
		"json secret": s, "json struct": h, "json *struct": &h,
		"json map": map[string]secrets.Secret{"k": s}, "json slice": []any{s, h},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		renderings[name] = string(b)
		if !json.Valid(b) {
			t.Errorf("%s: invalid JSON %s", name, b)
		}
	}
	txt, _ := s.MarshalText()
	renderings["MarshalText"] = string(txt)

	for _, handler := range []string{"text", "json"} {
		var buf bytes.Buffer
		var lh slog.Handler = slog.NewTextHandler(&buf, nil)
		if handler == "json" {
			lh = slog.NewJSONHandler(&buf, nil)
		}
		l := slog.New(lh)
		l.Info("call", "key", s, "holder", h, "ptr", &h, slog.Group("g", "key", s))
		l.With("key", s).WithGroup("grp").Info("with", "m", map[string]secrets.Secret{"k": s})
		renderings["slog "+handler] = buf.String()
	}

	wrapped := fmt.Errorf("calling api: %w", keyError{Key: s})
	renderings["error"] = wrapped.Error()
	renderings["error %+v"] = fmt.Sprintf("%+v", wrapped)
	renderings["errors.Join"] = errors.Join(wrapped, fmt.Errorf("key %v", s)).Error()

	for name, out := range renderings {
		if strings.Contains(out, secretValue) || strings.Contains(out, "canary") {
			t.Errorf("%s leaked the value: %s", name, out)
		}
		if !strings.Contains(out, secrets.Redacted) && !strings.Contains(name, "%p") && !strings.HasPrefix(name, "agent.") &&
			!strings.Contains(name, "%x") && !strings.Contains(name, "%X") && !strings.Contains(name, "%d") {
			// The unexported field shows an address, the rest [REDACTED].
			t.Errorf("%s does not say %s: %s", name, secrets.Redacted, out)
		}
	}
}

func TestSecretAccessors(t *testing.T) {
	s := secrets.New("API_KEY", secretValue)
	if s.Name() != "API_KEY" || s.Reveal() != secretValue || s.IsZero() {
		t.Fatalf("accessors: name %q, zero %v", s.Name(), s.IsZero())
	}
	var zero secrets.Secret
	if !zero.IsZero() || zero.Reveal() != "" || !secrets.New("X", "").IsZero() {
		t.Fatal("zero secret is not zero")
	}
}
