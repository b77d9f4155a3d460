package posture_test

import (
	"context"
	"testing"

	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/posture"
)

func control(t *testing.T, rep posture.Report, id, name string) posture.Control {
	t.Helper()
	for _, c := range rep.Criteria {
		if c.ID != id {
			continue
		}
		for _, k := range c.Controls {
			if k.Name == name {
				return k
			}
		}
	}
	t.Fatalf("no control %s/%q", id, name)
	return posture.Control{}
}

func TestPostureReadsTheLiveConfiguration(t *testing.T) {
	env := []string{"HOME=" + t.TempDir(), "USER=alice"}
	e, err := engine.Open(context.Background(), engine.Defaults(env), &engine.Options{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	rep := posture.Assess(context.Background(), e)
	e.Close()
	if len(rep.Criteria) != 10 {
		t.Fatalf("%d criteria", len(rep.Criteria))
	}
	if !control(t, rep, "C5", "Rule of Two enforced").On || !control(t, rep, "C9", "audit on, write-ahead, fail closed").On || !control(t, rep, "C9", "audit log verifies").On {
		t.Fatalf("defaults: %+v", rep)
	}

	cfg := engine.Defaults(env)
	cfg.UnsafeDisableRuleOfTwo = true
	e, err = engine.Open(context.Background(), cfg, &engine.Options{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if control(t, posture.Assess(context.Background(), e), "C5", "Rule of Two enforced").On {
		t.Fatal("a disabled Rule of Two reported as on")
	}
}
