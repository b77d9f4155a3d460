package sandbox

import (
	"context"
	"strings"
	"testing"
)

func TestDoctorReportsUsableKinds(t *testing.T) {
	t.Parallel()
	got := map[string]Check{}
	for _, c := range Doctor(context.Background(), nil) {
		got[c.Name] = c
	}
	for _, name := range []string{"wasm", "javascript", "os", "python"} {
		if c, ok := got[name]; !ok || !c.OK {
			t.Errorf("%s: %+v (this machine has bubblewrap and python3)", name, c)
		}
	}
	if !strings.Contains(got["python"].Detail, "Python 3") {
		t.Errorf("python detail: %q", got["python"].Detail)
	}
}

func TestDoctorSaysWhyOSIsUnusable(t *testing.T) {
	t.Parallel()
	got := map[string]Check{}
	for _, c := range Doctor(context.Background(), &OSOptions{Bwrap: "/nonexistent/bwrap"}) {
		got[c.Name] = c
	}
	if c := got["os"]; c.OK || !strings.Contains(c.Detail, "install bubblewrap") {
		t.Errorf("os: %+v", c)
	}
	if c := got["python"]; c.OK {
		t.Errorf("python: %+v", c)
	}
	if c := got["wasm"]; !c.OK {
		t.Errorf("wasm: %+v", c)
	}
}
