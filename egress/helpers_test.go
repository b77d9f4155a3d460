package egress

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readVectors returns the non-comment lines of a vector file in testdata.
func readVectors(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatalf("no vectors in %s", name)
	}
	return out
}

// witness is a loopback listener that counts the connections it accepts.
type witness struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &witness{ln: ln}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			w.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); w.wg.Wait() })
	return w
}

func (w *witness) addrPort() netip.AddrPort {
	return netip.MustParseAddrPort(w.ln.Addr().String())
}

func (w *witness) port() string { return strconv.Itoa(int(w.addrPort().Port())) }

// settle makes one unguarded connection and waits until it is counted, so
// that every connection made before it has been counted too (accept is
// FIFO). It returns the count before that sentinel.
func (w *witness) settle(t *testing.T) int64 {
	t.Helper()
	before := w.accepted.Load()
	c, err := net.DialTimeout("tcp", w.ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for w.accepted.Load() <= before {
		if time.Now().After(deadline) {
			t.Fatal("witness never accepted the sentinel connection")
		}
		time.Sleep(time.Millisecond)
	}
	return w.accepted.Add(-1)
}

// fixedResolver answers every name with the same addresses and counts calls.
type fixedResolver struct {
	addrs []string
	calls atomic.Int64
}

func (r *fixedResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.calls.Add(1)
	var out []net.IPAddr
	for _, a := range r.addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

// rebindingResolver answers its first lookup with a public address and
// every later one with loopback, like an attacker's DNS server with TTL 0.
type rebindingResolver struct{ calls atomic.Int64 }

func (r *rebindingResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	if r.calls.Add(1) == 1 {
		return []net.IPAddr{{IP: net.ParseIP("93.184.215.14")}}, nil
	}
	return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}}, nil
}

func mustNew(t testing.TB, o *Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// asPolicy returns the *PolicyError in err or fails the test.
func asPolicy(t *testing.T, err error, what string) *PolicyError {
	t.Helper()
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: want *PolicyError, got %T: %v", what, err, err)
	}
	return pe
}

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// record collects strings from handler goroutines.
type record struct {
	mu sync.Mutex
	s  []string
}

func (r *record) add(s string) { r.mu.Lock(); r.s = append(r.s, s); r.mu.Unlock() }

func (r *record) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.s...)
}
