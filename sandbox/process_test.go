package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOSStartConversation(t *testing.T) {
	t.Parallel()
	w := watchProcs(t)
	var stderr bytes.Buffer
	spec := py("import sys\nprint('ready', file=sys.stderr, flush=True)\nfor line in sys.stdin:\n    print(line.upper(), end='', flush=True)\n", w.marker)
	spec.Args = append([]string{"-u"}, spec.Args...)
	p, err := testSB.os.Start(context.Background(), spec, &StartOptions{Stderr: &lockedBuffer{b: &stderr}})
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(p)
	for _, msg := range []string{"hello\n", "second line\n"} {
		if _, err := p.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got, err := out.ReadString('\n')
		if err != nil || got != strings.ToUpper(msg) {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("wait: %+v %v", res, err)
	}
	w.assertGone(t)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestOSStartCloseKillsAStubbornProgram(t *testing.T) {
	t.Parallel()
	w := watchProcs(t)
	p, err := testSB.os.Start(context.Background(), sh("trap '' TERM HUP; sleep 60 & sleep 60", w.marker), &StartOptions{Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Close()
	if d := time.Since(start); d > time.Second+100*time.Millisecond {
		t.Fatalf("Close took %v", d)
	}
	w.assertGone(t)
	if _, err := p.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read from a closed process")
	}
}

func TestOSStartEndsWithItsContext(t *testing.T) {
	t.Parallel()
	w := watchProcs(t)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := testSB.os.Start(ctx, sh("sleep 60", w.marker), nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	start := time.Now()
	if _, err := p.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
	w.assertGone(t)
	p.Close()
}

func TestOSStartFailsClosed(t *testing.T) {
	t.Parallel()
	o, _ := NewOS(&OSOptions{Bwrap: "/nonexistent/bwrap"})
	var se *SetupError
	if _, err := o.Start(context.Background(), sh("true"), nil); !errors.As(err, &se) {
		t.Fatalf("err = %v, want *SetupError", err)
	}
	spec := sh("true")
	spec.Stdin = []byte("x")
	if _, err := testSB.os.Start(context.Background(), spec, nil); err == nil {
		t.Fatalf("Stdin accepted by Start")
	}
}
