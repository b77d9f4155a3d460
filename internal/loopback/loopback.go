// Package loopback holds what the project's tests use to show that nothing
// crossed the egress guard: a listener on 127.0.0.1 that counts every
// connection and byte reaching it, a resolver that points any name at one
// address, and the lists of URLs the guard must refuse.
package loopback

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Listener counts every connection and byte that reaches a loopback port.
type Listener struct {
	net.Listener
	Conns, Bytes atomic.Int64

	wg    sync.WaitGroup
	mu    sync.Mutex
	open  []net.Conn
	ended bool
}

// Listen starts a counting listener on 127.0.0.1; it is closed, with every
// connection it accepted, when the test ends.
func Listen(t testing.TB) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listener{Listener: ln}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.Conns.Add(1)
			l.mu.Lock()
			if l.ended {
				l.mu.Unlock()
				_ = c.Close()
				continue
			}
			l.open = append(l.open, c)
			l.wg.Add(1)
			l.mu.Unlock()
			go func() {
				defer l.wg.Done()
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				l.Bytes.Add(n)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		l.mu.Lock()
		l.ended = true
		for _, c := range l.open {
			_ = c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return l
}

// Port is the listener's port.
func (l *Listener) Port() string {
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// StaticResolver answers every name with one address: a DNS answer that
// points a public-looking name at a private address.
type StaticResolver struct{ IP net.IP }

// LookupIPAddr implements egress.Resolver.
func (s StaticResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: s.IP}}, nil
}

// Vectors reads a list of URLs, one a line, # for comments (such as
// testdata/ssrf-blocked.txt). Fewer than ten means the file is not the
// list, and fails the test.
func Vectors(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("only %d vectors in %s", len(out), path)
	}
	return out
}
