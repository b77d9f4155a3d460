package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sandboxes shared by the tests: one Wasm sandbox, so that QuickJS compiles
// once per test binary (it takes a while under -race), and one OS sandbox.
var testSB struct {
	wasm *Wasm
	os   *OS
}

func TestMain(m *testing.M) {
	ctx := context.Background()
	w, err := NewWasm(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasm sandbox:", err)
		os.Exit(1)
	}
	o, err := NewOS(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "os sandbox:", err)
		os.Exit(1)
	}
	testSB.wasm, testSB.os = w, o
	// Every test runs with a canary in the server's environment; the tests
	// that look for it set a fresh one with t.Setenv.
	os.Setenv(canaryName, randomToken())
	// Compile QuickJS while the first tests run.
	go func() {
		_, _ = w.Run(ctx, JavaScript("0"))
	}()
	code := m.Run()
	_ = w.Close(ctx)
	os.Exit(code)
}

const canaryName = "BABEL_TEST_CANARY"

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "tok" + hex.EncodeToString(b)
}

// setCanary puts a fresh random canary in the server's environment.
func setCanary(t *testing.T) string {
	v := randomToken()
	t.Setenv(canaryName, v)
	return v
}

func assertNoCanary(t *testing.T, where string, out []byte) {
	t.Helper()
	if bytes.Contains(out, []byte(canaryName)) || bytes.Contains(out, []byte(os.Getenv(canaryName))) {
		t.Errorf("%s: the server's environment leaked into the sandbox: %q", where, out)
	}
}

func wantLimit(t *testing.T, err error, limit string) {
	t.Helper()
	got, ok := IsLimit(err)
	if !ok || got != limit {
		t.Fatalf("err = %v, want the %q limit", err, limit)
	}
}

// procWatch watches /proc for the processes of one sandbox run, recognised
// by a marker on their command line (bubblewrap's and the program's), and
// records bubblewrap's process group while the run lasts.
type procWatch struct {
	marker string
	stop   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	pgids map[int]bool // groups led by a process of the run: bubblewrap's, the sandbox session's
}

func watchProcs(t *testing.T) *procWatch {
	w := &procWatch{marker: "marker-" + randomToken(), stop: make(chan struct{}), pgids: map[int]bool{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			for _, p := range w.matching() {
				if _, pgid, ok := procStat(p); ok && pgid == p {
					w.mu.Lock()
					w.pgids[pgid] = true
					w.mu.Unlock()
				}
			}
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *procWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

func (w *procWatch) matching() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmd, []byte(w.marker)) {
			out = append(out, pid)
		}
	}
	return out
}

// assertGone checks, once Run has returned, that no process of the run is
// left: none carries the marker, none is in a process group of the run
// (bubblewrap's, or the session the sandbox starts).
func (w *procWatch) assertGone(t *testing.T) {
	t.Helper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pgids) == 0 {
		t.Errorf("never saw the sandbox's process group while it ran")
	}
	if left := w.matching(); len(left) > 0 {
		t.Errorf("processes of the sandbox remain after Run: %v", describe(left))
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, g, ok := procStat(pid); ok && w.pgids[g] {
			t.Errorf("process %d remains in process group %d of the sandbox: %s", pid, g, describe([]int{pid}))
		}
	}
}

func describe(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		fmt.Fprintf(&b, "[%s] ", strings.TrimSpace(string(stat)))
	}
	return b.String()
}
