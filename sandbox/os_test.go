package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func runOS(t *testing.T, spec *Spec) (*Result, error) {
	t.Helper()
	return testSB.os.Run(context.Background(), spec)
}

func sh(script string, args ...string) *Spec {
	return &Spec{Program: "/bin/sh", Args: append([]string{"-c", script, "sh"}, args...)}
}

func py(code string, args ...string) *Spec {
	return &Spec{Program: PythonPath, Args: append([]string{"-c", code}, args...)}
}

func mustRun(t *testing.T, spec *Spec) *Result {
	t.Helper()
	res, err := runOS(t, spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestOSSandboxSeesOnlyDeclaredEnvironment(t *testing.T) {
	canary := setCanary(t)
	spec := sh(`env; echo ---; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'`)
	spec.Env = map[string]string{"DECLARED": "yes"}
	res := mustRun(t, spec)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	assertNoCanary(t, "os sandbox env", res.Stdout)
	if strings.Contains(string(res.Stdout), canary) {
		t.Fatalf("canary visible")
	}
	if !strings.Contains(string(res.Stdout), "DECLARED=yes") {
		t.Errorf("declared variable missing: %s", res.Stdout)
	}
}

func TestOSSandboxProcessIsUnprivileged(t *testing.T) {
	t.Parallel()
	res := mustRun(t, sh(`cat /proc/self/status; echo uid=$(id -u)`))
	out := string(res.Stdout)
	for _, want := range []string{
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2", "uid=65534",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/proc/self/status lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Uid:") && strings.Contains(line, "\t0\t") {
			t.Errorf("runs as root: %s", line)
		}
	}
}

func TestOSSandboxCannotReadHostFiles(t *testing.T) {
	t.Parallel()
	// A stand-in for the store and the audit log: a file of the server's.
	dir := t.TempDir()
	secret := filepath.Join(dir, "store.db")
	if err := os.WriteFile(secret, []byte("private-"+randomToken()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	res := mustRun(t, sh(`
for f in /etc/shadow /etc/passwd /root/.ssh/id_rsa "$1" "$2/go.mod" ../../"$1" ../../../../etc/shadow /proc/1/root/etc/shadow; do
  if cat "$f" >/dev/null 2>&1; then echo "READ $f"; fi
done
ls -a .. /; echo; ls "$3" 2>&1; ls /proc`, secret, filepath.Dir(cwd), dir))
	out := string(res.Stdout)
	if strings.Contains(out, "READ ") {
		t.Fatalf("the sandbox read host files:\n%s", out)
	}
	if strings.Contains(out, "store.db") || strings.Contains(out, "private-") {
		t.Fatalf("the sandbox saw the server's files:\n%s", out)
	}
	// /proc shows the sandbox's own processes only.
	if n := strings.Count(out, "\n1\n"); n == 0 {
		t.Logf("ls /proc: %s", out)
	}
}

func TestOSSandboxWritesOnlyItsOwnDirectories(t *testing.T) {
	t.Parallel()
	res := mustRun(t, sh(`
for f in /x /usr/x /etc/x /bin/x /proc/x /dev/x ../x ../../x; do
  if (echo x > "$f") 2>/dev/null; then echo "WROTE $f"; fi
done
echo ok > /work/a && echo ok > /tmp/b && cat /work/a /tmp/b`))
	out := string(res.Stdout)
	if strings.Contains(out, "WROTE") {
		t.Fatalf("wrote outside the work directory:\n%s", out)
	}
	if !strings.HasSuffix(out, "ok\nok\n") {
		t.Fatalf("could not write the work directory and /tmp: %q %s", out, res.Stderr)
	}
}

func TestOSSandboxForgetsBetweenCalls(t *testing.T) {
	t.Parallel()
	res := mustRun(t, sh(`echo one > /work/left && echo one > /tmp/left && ls /work /tmp`))
	if !strings.Contains(string(res.Stdout), "left") {
		t.Fatalf("first call could not write: %s %s", res.Stdout, res.Stderr)
	}
	res = mustRun(t, sh(`ls -A /work /tmp; cat /work/left /tmp/left 2>&1`))
	if strings.Contains(string(res.Stdout), "one") || strings.Contains(string(res.Stdout), "left\n") {
		t.Fatalf("a file written in one call is visible in the next:\n%s", res.Stdout)
	}
}

func TestOSSandboxHasNoNetwork(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res := mustRun(t, py(`
import socket, sys
for host, port in (("127.0.0.1", int(sys.argv[1])), ("1.1.1.1", 53), ("1.1.1.1", 443), ("169.254.169.254", 80), ("::1", int(sys.argv[1]))):
    try:
        s = socket.create_connection((host, port), timeout=1)
        print("CONNECTED", host, port)
    except OSError as e:
        print("refused", host, port, e)
try:
    socket.getaddrinfo("example.com", 80)
    print("RESOLVED")
except OSError as e:
    print("no dns", e)
`, fmt.Sprint(port)))
	out := string(res.Stdout)
	if strings.Contains(out, "CONNECTED") || strings.Contains(out, "RESOLVED") {
		t.Fatalf("the sandbox reached the network:\n%s", out)
	}
	if !strings.Contains(out, "refused 169.254.169.254") {
		t.Fatalf("unexpected output: %s %s", out, res.Stderr)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepts.Load(); n != 0 {
		t.Fatalf("the host listener accepted %d connections from the sandbox", n)
	}
}

func TestOSSandboxSeccompRefusesDangerousSyscalls(t *testing.T) {
	t.Parallel()
	res := mustRun(t, py(`
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(name, nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print(name, r, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()) if r < 0 else "ALLOWED")
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
sc("unshare", 272, CLONE_NEWUSER)
sc("unshare_net", 272, CLONE_NEWNET)
sc("clone_newuser", 56, CLONE_NEWUSER | 17, 0, 0, 0, 0)
sc("clone3", 435, 0, 0)
sc("ptrace", 101, 0, 0, 0, 0)
sc("io_uring_setup", 425, 8, 0)
sc("bpf", 321, 0, 0, 0)
sc("perf_event_open", 298, 0, 0, -1, -1, 0)
sc("mount", 165, 0, 0, 0, 0, 0)
sc("kexec_load", 246, 0, 0, 0, 0)
sc("keyctl", 250, 0, 0, 0, 0, 0)
sc("setns", 308, 0, 0)
`))
	out := string(res.Stdout)
	if res.ExitCode != 0 || !strings.Contains(out, "setns") {
		t.Fatalf("exit %d: %s %s", res.ExitCode, out, res.Stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		want := "EPERM"
		if f[0] == "clone3" {
			want = "ENOSYS"
		}
		if len(f) != 3 || f[2] != want {
			t.Errorf("%s: got %q, want %s", f[0], line, want)
		}
	}
}

func TestOSSandboxSeccompKillsForeignABI(t *testing.T) {
	t.Parallel()
	// An i386 syscall (int 0x80) has other numbers, which a filter written
	// for x86-64 would misread; the filter kills it instead.
	res := mustRun(t, py(`
import ctypes, mmap
code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax, 20 (getpid); int 0x80; ret
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
print("ran", f())
`))
	if strings.Contains(string(res.Stdout), "ran") || res.ExitCode != 128+int(syscall.SIGSYS) {
		t.Fatalf("32-bit syscall was not killed: exit %d, %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func TestOSSandboxInheritsNoDescriptor(t *testing.T) {
	t.Parallel()
	// A descriptor the server holds without close-on-exec (as one inherited
	// from its own parent would be) must not reach the sandbox.
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "leak"), syscall.O_CREAT|syscall.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	res := mustRun(t, sh(`ls /proc/self/fd`))
	if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != "0 1 2 3" { // 3: ls's own directory
		t.Fatalf("descriptors in the sandbox: %v (want 0 1 2 and ls's own)", got)
	}
}

func TestOSSandboxLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		spec  func(marker string) *Spec
		lim   Limits
		limit string
	}{
		{"infinite loop", func(m string) *Spec { return py("while True: pass", m) }, Limits{CPUTime: time.Second}, LimitCPUTime},
		{"sleep", func(m string) *Spec { return sh("sleep 30", m) }, Limits{WallClock: 500 * time.Millisecond}, LimitWallClock},
		{"memory bomb", func(m string) *Spec {
			return py("a = []\nwhile True: a.append(bytearray(1 << 20))", m)
		}, Limits{Memory: 128 << 20}, LimitMemory},
		{"fork bomb", func(m string) *Spec {
			return py("import os, time\nwhile True:\n    os.fork()", m)
		}, Limits{Processes: 16}, LimitProcesses},
		{"shell fork bomb", func(m string) *Spec { return sh("f() { f | f & }; f; sleep 5", m) }, Limits{Processes: 16, WallClock: 2 * time.Second}, ""},
		// The short sleeps let the test see the processes of a fast run.
		{"huge output", func(m string) *Spec { return sh("sleep 0.2; yes", m) }, Limits{Output: 64 << 10}, LimitOutput},
		{"huge file", func(m string) *Spec { return sh("sleep 0.2; head -c 10000000 /dev/zero > /work/big", m) }, Limits{FileSize: 1 << 20}, LimitFileSize},
		{"full tmpfs", func(m string) *Spec {
			return sh("sleep 0.2; for i in 1 2 3 4; do head -c 900000 /dev/zero > /tmp/f$i || exit 1; done", m)
		}, Limits{FileSize: 1 << 20}, LimitFileSize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := watchProcs(t)
			spec := c.spec(w.marker)
			spec.Limits = c.lim
			if spec.Limits.WallClock == 0 {
				// Generous: a second of CPU can take long on a loaded machine.
				spec.Limits.WallClock = 45 * time.Second
			}
			res, err := runOS(t, spec)
			w.assertGone(t)
			if c.limit == "" { // the shell fork bomb: stopped by whichever limit
				if _, ok := IsLimit(err); !ok {
					t.Fatalf("err = %v, want a limit", err)
				}
				return
			}
			wantLimit(t, err, c.limit)
			if res == nil {
				t.Fatalf("no partial result with the limit error")
			}
			if c.limit == LimitOutput && int64(len(res.Stdout)) != c.lim.Output {
				t.Errorf("stdout holds %d bytes, want the cap %d", len(res.Stdout), c.lim.Output)
			}
		})
	}
}

func TestOSSandboxCancelKillsWithinASecond(t *testing.T) {
	t.Parallel()
	w := watchProcs(t)
	ctx, cancel := context.WithCancel(context.Background())
	var cancelledAt time.Time
	go func() {
		time.Sleep(500 * time.Millisecond)
		cancelledAt = time.Now()
		cancel()
	}()
	_, err := testSB.os.Run(ctx, sh("sleep 60 & sleep 60; wait", w.marker))
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := returned.Sub(cancelledAt); d > time.Second {
		t.Fatalf("Run returned %v after cancel, want under 1s", d)
	}
	w.assertGone(t)
}

func TestOSSandboxRunDeadlineIsNotALimit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := testSB.os.Run(ctx, sh("sleep 10"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
}

func TestOSSandboxMissingBwrapFailsClosed(t *testing.T) {
	t.Parallel()
	o, err := NewOS(&OSOptions{Bwrap: "/nonexistent/bwrap"})
	if err != nil {
		t.Fatal(err)
	}
	proof := filepath.Join(t.TempDir(), "ran-on-host")
	_, err = o.Run(context.Background(), sh(`touch "$1"`, proof))
	var se *SetupError
	if !errors.As(err, &se) || se.Kind != KindOS {
		t.Fatalf("err = %v, want a *SetupError", err)
	}
	if _, err := os.Stat(proof); err == nil {
		t.Fatalf("the program ran on the host")
	}
	if _, err := NewOS(&OSOptions{Bwrap: "bwrap"}); err == nil {
		t.Errorf("a relative bubblewrap path was accepted")
	}
	if _, err := NewOS(&OSOptions{RunAs: &Credential{UID: 0}}); err == nil {
		t.Errorf("running sandboxes as host root was accepted")
	}
}

func TestOSSandboxRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	for _, spec := range []*Spec{
		nil,
		{Program: "python3"},
		{Program: "/bin/true", Code: []byte("x")},
		{Program: "/bin/true", Env: map[string]string{"A=B": "c"}},
		{Program: "/bin/true", Files: []File{{Name: "../x"}}},
		{Program: "/bin/true", Files: []File{{Name: "a/b"}}},
		{Program: "/bin/true", Files: []File{{Name: "a"}, {Name: "a"}}},
		{Program: "/bin/true", Args: []string{"a\x00b"}},
	} {
		if _, err := testSB.os.Run(context.Background(), spec); err == nil {
			t.Errorf("spec %+v accepted", spec)
		}
	}
}

func TestPythonRunsCodeOnStdin(t *testing.T) {
	t.Parallel()
	spec := Python(`
import json, sys, os
d = json.load(sys.stdin)
try:
    open("/work/main.py", "a").write("x")
    ro = False
except OSError:
    ro = True
print(json.dumps({"sum": d["a"] + d["b"], "readonly_code": ro, "cwd": os.getcwd()}))
`)
	spec.Stdin = []byte(`{"a": 2, "b": 3}`)
	res := mustRun(t, spec)
	if got := strings.TrimSpace(string(res.Stdout)); got != `{"sum": 5, "readonly_code": true, "cwd": "/work"}` {
		t.Fatalf("got %q (stderr %s)", got, res.Stderr)
	}
}

func TestOSSandboxRunsFilesAsPrograms(t *testing.T) {
	t.Parallel()
	spec := &Spec{
		Program: WorkDir + "/tool",
		Args:    []string{"a b", "c"},
		Files: []File{
			{Name: "tool", Data: []byte("#!/bin/sh\nprintf '%s|' \"$@\"; cat data\n"), Executable: true},
			{Name: "data", Data: []byte("payload")},
		},
	}
	res := mustRun(t, spec)
	if got := string(res.Stdout); got != "a b|c|payload" {
		t.Fatalf("got %q, stderr %s", got, res.Stderr)
	}
}
