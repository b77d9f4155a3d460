package broker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/secrets"
	"github.com/babelagent/babel/secrets/broker"
)

// recordingSource is a real Env that remembers every name it was asked for.
type recordingSource struct {
	env   *secrets.Env
	mu    sync.Mutex
	asked []string
}

func (r *recordingSource) Lookup(ctx context.Context, name string) (secrets.Secret, error) {
	r.mu.Lock()
	r.asked = append(r.asked, name)
	r.mu.Unlock()
	return r.env.Lookup(ctx, name)
}

func newSource() *recordingSource {
	return &recordingSource{env: secrets.NewEnv([]string{
		"KEY_A=value-of-key-a", "KEY_B=value-of-key-b", "SECRET_X=ambient-server-secret", "SHORT=abc",
	})}
}

func TestScopeGivesANodeOnlyWhatItDeclared(t *testing.T) {
	src := newSource()
	b := broker.New(src, nil)
	set, err := b.Scope(context.Background(), []string{"KEY_A", "KEY_A"})
	if err != nil {
		t.Fatal(err)
	}
	if names := set.Names(); !slices.Equal(names, []string{"KEY_A"}) {
		t.Fatalf("node sees %v, want only KEY_A", names)
	}
	if s, ok := set.Get("KEY_A"); !ok || s.Reveal() != "value-of-key-a" {
		t.Fatal("KEY_A missing")
	}
	for _, other := range []string{"KEY_B", "SECRET_X"} {
		if _, ok := set.Get(other); ok {
			t.Errorf("node sees undeclared %s", other)
		}
	}
	if !slices.Equal(src.asked, []string{"KEY_A"}) {
		t.Fatalf("broker asked the source for %v", src.asked)
	}
	// The value handed out is now redacted everywhere; the others were never
	// fetched, so the broker never held them.
	red := b.Redactor()
	if out := red.Redact("x value-of-key-a y"); strings.Contains(out, "value-of-key-a") {
		t.Fatalf("resolved value not registered: %q", out)
	}
	if out := red.Redact("value-of-key-b"); out != "value-of-key-b" {
		t.Fatalf("undeclared value was registered: %q", out)
	}
	// And the set travels to the agent through its context.
	ctx := agent.WithSecrets(context.Background(), set)
	if _, ok := agent.SecretsFrom(ctx).Get("SECRET_X"); ok {
		t.Fatal("SECRET_X reachable through the call context")
	}
}

func TestScopeNamesEveryMissingSecret(t *testing.T) {
	red := secrets.NewRedactor()
	b := broker.New(newSource(), red)
	set, err := b.Scope(context.Background(), []string{"KEY_A", "NOPE_1", "NOPE_2"})
	if set != nil || err == nil {
		t.Fatalf("Scope = %v, %v; want an error", set, err)
	}
	var nf *secrets.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("error %v is not a *NotFoundError", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "NOPE_1") || !strings.Contains(msg, "NOPE_2") || strings.Contains(msg, "value-of") {
		t.Fatalf("error should name the missing secrets and no value: %s", msg)
	}
}

func TestScopeRefusesWhatItCannotRedact(t *testing.T) {
	_, err := broker.New(newSource(), nil).Scope(context.Background(), []string{"SHORT"})
	if err == nil || !strings.Contains(err.Error(), "SHORT") || strings.Contains(err.Error(), "abc") {
		t.Fatalf("short secret: %v", err)
	}
}

func TestScopeEdgeCases(t *testing.T) {
	ctx := context.Background()
	if set, err := broker.New(nil, nil).Scope(ctx, nil); err != nil || len(set.Names()) != 0 {
		t.Fatalf("no names: %v, %v", set, err)
	}
	var nf *secrets.NotFoundError
	if _, err := broker.New(nil, nil).Scope(ctx, []string{"KEY_A"}); !errors.As(err, &nf) {
		t.Fatalf("nil source: %v", err)
	}
	if _, err := broker.New(newSource(), nil).Scope(ctx, []string{"bad name"}); err == nil {
		t.Fatal("invalid name accepted")
	}
	var nilBroker *broker.Broker
	if _, err := nilBroker.Scope(ctx, []string{"KEY_A"}); err == nil {
		t.Fatal("nil broker handed out secrets")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := broker.New(newSource(), nil).Scope(cctx, []string{"KEY_A"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	boom := errors.New("keyring exploded")
	if _, err := broker.New(secrets.Chain{failing{boom}}, nil).Scope(ctx, []string{"KEY_A"}); !errors.Is(err, boom) {
		t.Fatalf("source failure lost: %v", err)
	}
}

type failing struct{ err error }

func (f failing) Lookup(context.Context, string) (secrets.Secret, error) {
	return secrets.Secret{}, f.err
}
