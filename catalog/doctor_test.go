package catalog

import (
	"context"
	"strings"
	"testing"

	"github.com/babelagent/babel/sandbox"
)

func find(t *testing.T, checks []Check, family, name string) Check {
	t.Helper()
	for _, c := range checks {
		if c.Family == family && c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s/%s check in %+v", family, name, checks)
	return Check{}
}

func TestDoctorSaysWhetherStdioServersAreConfined(t *testing.T) {
	t.Parallel()
	checks := Doctor(context.Background())
	for _, name := range []string{"wasm", "javascript", "os", "python"} {
		if c := find(t, checks, "sandbox", name); !c.OK {
			t.Errorf("sandbox %s: %s (bubblewrap and python3 are installed here)", name, c.Detail)
		}
	}
	for _, name := range []string{"mcp+stdio", "code", "process"} {
		if c := find(t, checks, "adapter", name); !c.OK {
			t.Errorf("adapter %s: %s", name, c.Detail)
		}
	}
	if c := find(t, checks, "adapter", "mcp+stdio"); !strings.Contains(c.Detail, "bubblewrap") || !strings.Contains(c.Detail, "no network") {
		t.Errorf("mcp+stdio: %q; want it to say the servers are confined by bubblewrap", c.Detail)
	}
}

func TestDoctorSaysStdioServersFailWithoutBubblewrap(t *testing.T) {
	t.Parallel()
	checks := doctor(context.Background(), &sandbox.OSOptions{Bwrap: "/nonexistent/bwrap"})
	for _, name := range []string{"mcp+stdio", "process"} {
		c := find(t, checks, "adapter", name)
		if c.OK || !strings.Contains(c.Detail, "run only under bubblewrap") || !strings.Contains(c.Detail, "/nonexistent/bwrap") {
			t.Errorf("adapter %s without bubblewrap: %+v; want it unusable, saying why", name, c)
		}
	}
	if c := find(t, checks, "sandbox", "os"); c.OK {
		t.Errorf("sandbox os without bubblewrap: %+v", c)
	}
	// JavaScript still runs, on the wasm sandbox; Python does not.
	if c := find(t, checks, "adapter", "code"); !c.OK || !strings.Contains(c.Detail, "not python") {
		t.Errorf("code without bubblewrap: %+v; want js and wasm usable, python not", c)
	}
}
