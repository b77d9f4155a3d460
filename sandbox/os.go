package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultBwrap is where the os sandbox looks for bubblewrap.
const DefaultBwrap = "/usr/bin/bwrap"

// nobody is the unprivileged user (and group) the sandbox runs as: inside
// its user namespace always, and on the host when the server runs as root.
const nobody = 65534

// OSOptions configures an OS sandbox. Nil means the defaults.
type OSOptions struct {
	// Bwrap is the absolute path of the bubblewrap binary; empty means
	// DefaultBwrap. When it cannot run, Run fails with a *SetupError.
	Bwrap string
	// RunAs is the host user bubblewrap runs as. Nil means nobody
	// (65534:65534) when the server runs as root, else the server's own
	// user. Root must not be the host user of a sandbox: the kernel exempts
	// root's processes from RLIMIT_NPROC, and root owns the host's files.
	// Setting RunAs needs the privilege to switch users.
	RunAs *Credential
}

// Credential is a host user and group.
type Credential struct{ UID, GID uint32 }

// OS is the bubblewrap sandbox (kind "os"). It is safe for concurrent use.
type OS struct {
	bwrap  string
	cred   *syscall.Credential
	filter []byte
}

// NewOS returns an OS sandbox. It does not check that bubblewrap is
// installed (Doctor does, and Run fails closed without it).
func NewOS(opts *OSOptions) (*OS, error) {
	if opts == nil {
		opts = &OSOptions{}
	}
	bw := opts.Bwrap
	if bw == "" {
		bw = DefaultBwrap
	}
	if !filepath.IsAbs(bw) {
		return nil, &SetupError{Kind: KindOS, Reason: fmt.Sprintf("bubblewrap path %q is not absolute", bw)}
	}
	filter, err := seccompProgram()
	if err != nil {
		return nil, &SetupError{Kind: KindOS, Reason: err.Error(), Err: err}
	}
	o := &OS{bwrap: bw, filter: filter}
	switch {
	case opts.RunAs != nil:
		if opts.RunAs.UID == 0 {
			return nil, &SetupError{Kind: KindOS, Reason: "refusing to run sandboxes as host root"}
		}
		o.cred = &syscall.Credential{Uid: opts.RunAs.UID, Gid: opts.RunAs.GID}
	case os.Geteuid() == 0:
		o.cred = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	return o, nil
}

// Kind returns KindOS.
func (o *OS) Kind() Kind { return KindOS }

// Run runs spec.Program (an absolute path inside the sandbox) with
// spec.Args, spec.Files in the work directory and spec.Env as the whole
// environment.
func (o *OS) Run(ctx context.Context, spec *Spec) (*Result, error) {
	if err := o.check(spec); err != nil {
		return nil, err
	}
	lim := spec.Limits.withDefaults()
	runCtx, cancel := runContext(ctx, lim.WallClock, LimitWallClock)
	defer cancel(nil)
	over := func() { cancel(&LimitError{Limit: LimitOutput}) }
	stdout := &cappedBuffer{max: lim.Output, over: over}
	stderr := &cappedBuffer{max: lim.Output, over: over}
	r, err := o.launch(ctx, runCtx, spec, lim, bytes.NewReader(spec.Stdin), stdout, stderr)
	if err != nil {
		return nil, err
	}
	r.wait()
	res := &Result{Stdout: stdout.bytes(), Stderr: stderr.bytes(), Egress: r.egress}
	return r.outcome(ctx, res)
}

func (o *OS) check(spec *Spec) error {
	if spec == nil {
		return &SpecError{Field: "Spec", Reason: "nil"}
	}
	if !strings.HasPrefix(spec.Program, "/") {
		return &SpecError{Field: "Program", Reason: fmt.Sprintf("%q: want an absolute path inside the sandbox", spec.Program)}
	}
	if len(spec.Code) > 0 {
		return &SpecError{Field: "Code", Reason: "the os kind runs Program; pass code as a File"}
	}
	if err := checkEnv(spec.Env); err != nil {
		return err
	}
	if err := checkFiles(spec.Files); err != nil {
		return err
	}
	if spec.Egress != nil {
		if fi, err := os.Stat(PythonPath); err != nil || fi.IsDir() {
			return &SetupError{Kind: KindOS, Reason: fmt.Sprintf("egress needs %s for the relay inside the sandbox, and it is not usable", PythonPath)}
		}
	}
	for _, a := range spec.Args {
		if strings.ContainsRune(a, 0) {
			return &SpecError{Field: "Args", Reason: "an argument holds a NUL byte"}
		}
	}
	if fi, err := os.Stat(o.bwrap); err != nil || fi.IsDir() {
		if err == nil {
			err = errors.New("is a directory")
		}
		return &SetupError{Kind: KindOS, Reason: fmt.Sprintf("bubblewrap not usable at %s: %v", o.bwrap, err), Err: err}
	}
	return nil
}

// running is a started bubblewrap.
type running struct {
	cmd       *exec.Cmd
	kill      *killer
	startedR  *os.File
	runCtx    context.Context
	lim       Limits
	waitErr   error
	px        *proxy      // nil without Spec.Egress
	egress    EgressStats // what px did, once the sandbox is gone
	egressErr error       // the run's egress budget ran out, through px

	startedKnown, started bool
}

// awaitStarted blocks until the prologue says the program started (true)
// or bubblewrap is gone without it (false).
func (r *running) awaitStarted() bool {
	var buf [16]byte
	n, _ := r.startedR.Read(buf[:])
	r.startedKnown, r.started = true, n > 0
	return r.started
}

// launch starts bubblewrap for spec under runCtx, which ends the sandbox
// when it is done.
func (o *OS) launch(ctx, runCtx context.Context, spec *Spec, lim Limits, stdin io.Reader, stdout, stderr io.Writer) (*running, error) {
	// Descriptors for bubblewrap. The started pipe comes first, as fd 3,
	// which the prologue closes; bubblewrap closes the others once read.
	var files fdSet
	defer files.close()
	startedR, startedW, err := os.Pipe()
	if err != nil {
		return nil, &SetupError{Kind: KindOS, Reason: "pipe: " + err.Error(), Err: err}
	}
	files.add(startedW)
	var px *proxy
	fail := func(err error) (*running, error) {
		startedR.Close()
		if px != nil {
			px.close()
		}
		return nil, err
	}
	if spec.Egress != nil {
		// The relay's end of the socketpair is fd 4 (proxyCtlFD).
		var end *os.File
		if px, end, err = startProxy(runCtx, spec.Egress); err != nil {
			return fail(err)
		}
		if files.add(end) != proxyCtlFD {
			return fail(&SetupError{Kind: KindOS, Reason: "egress descriptor out of place"})
		}
	}
	seccompFD, err := files.memfd("seccomp", o.filter)
	if err != nil {
		return fail(err)
	}
	fileFDs := make([]int, len(spec.Files))
	for i, f := range spec.Files {
		if f.Host != "" {
			fileFDs[i], err = files.hostFile(f.Host, f.Executable)
		} else {
			fileFDs[i], err = files.memfd("file", f.Data)
		}
		if err != nil {
			return fail(err)
		}
	}
	argsFD, err := files.memfd("args", nulJoin(o.args(spec, lim, seccompFD, fileFDs, px != nil)))
	if err != nil {
		return fail(err)
	}
	if err := closeOnExecInherited(); err != nil {
		return fail(&SetupError{Kind: KindOS, Reason: "mark inherited descriptors close-on-exec: " + err.Error(), Err: err})
	}

	// Arguments go through a file descriptor: a --setenv VALUE on the
	// command line would be readable by every local user in /proc.
	cmd := exec.CommandContext(runCtx, o.bwrap, append([]string{"--args", strconv.Itoa(argsFD)}, command(spec, lim)...)...)
	cmd.Env = []string{} // not nil: nil would mean the server's environment
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = files.files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: o.cred}
	k := &killer{}
	cmd.Cancel = func() error { return k.kill(cmd.Process.Pid) }
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		if stop := stopCause(ctx, runCtx); stop != nil {
			return fail(stop)
		}
		return fail(&SetupError{Kind: KindOS, Reason: "cannot run bubblewrap: " + err.Error(), Err: err})
	}
	return &running{cmd: cmd, kill: k, startedR: startedR, runCtx: runCtx, lim: lim, px: px}, nil
}

// wait waits for bubblewrap to exit and for every process of the sandbox
// to be gone.
func (r *running) wait() {
	r.waitErr = r.cmd.Wait()
	r.kill.waitGone(time.Second)
	if r.px != nil {
		r.egress = r.px.close()
		r.egressErr = r.px.budgetErr()
	}
}

// outcome classifies a finished run; res holds its output.
func (r *running) outcome(ctx context.Context, res *Result) (*Result, error) {
	started := r.started
	if !r.startedKnown {
		started = readStarted(r.startedR)
	}
	r.startedR.Close()
	res.ExitCode = -1
	st := r.cmd.ProcessState
	if st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = st.ExitCode()
		}
	}
	if stop := stopCause(ctx, r.runCtx); stop != nil {
		return res, stop
	}
	if r.egressErr != nil { // the run's egress budget, spent through the proxy
		return res, r.egressErr
	}
	if st == nil {
		return nil, &SetupError{Kind: KindOS, Reason: "bubblewrap: " + r.waitErr.Error(), Err: r.waitErr}
	}
	if !started {
		// bubblewrap (or the rlimit prologue) failed before the program ran.
		reason := tail(res.Stderr, 512)
		if reason == "" {
			reason = fmt.Sprintf("exited with status %d before the program started", res.ExitCode)
		}
		return nil, &SetupError{Kind: KindOS, Reason: reason}
	}
	if limit := limitFromExit(res, r.lim, st); limit != "" {
		return res, &LimitError{Limit: limit}
	}
	return res, nil
}

// args builds bubblewrap's arguments. The sandbox sees: a read-only /usr
// (with the usual /bin, /lib, /lib64 and /sbin links), /etc/ld.so.cache
// and nothing else of /etc, a private /proc and /dev, an empty /tmp and an
// empty work directory (tmpfs, each capped at FileSize), the Files, and a
// read-only root. No network but its own loopback, no host user, no
// capability, a new session, no further user namespaces.
func (o *OS) args(spec *Spec, lim Limits, seccompFD int, fileFDs []int, proxied bool) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		// The program is the pid namespace's pid 1: when it exits, the kernel
		// kills everything left in the sandbox before bubblewrap (its parent)
		// sees it go, and no bubblewrap init is orphaned to the host's init.
		"--as-pid-1",
		"--uid", strconv.Itoa(nobody), "--gid", strconv.Itoa(nobody),
		"--hostname", "sandbox",
		"--cap-drop", "ALL",
		"--new-session", "--die-with-parent",
		"--clearenv",
	}
	env := map[string]string{
		"PATH":   "/usr/local/bin:/usr/bin:/bin",
		"HOME":   WorkDir,
		"TMPDIR": "/tmp",
		"LANG":   "C.UTF-8",
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	if proxied {
		for k, v := range proxyEnv() {
			env[k] = v
		}
	}
	for k, v := range env {
		a = append(a, "--setenv", k, v)
	}
	size := strconv.FormatInt(lim.FileSize, 10)
	a = append(a,
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin",
		"--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64",
		"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
		"--proc", "/proc",
		"--dev", "/dev", "--remount-ro", "/dev",
		"--size", size, "--tmpfs", "/tmp",
		"--size", size, "--tmpfs", WorkDir,
	)
	for i, f := range spec.Files {
		perms := "0444"
		if f.Executable {
			perms = "0555"
		}
		a = append(a, "--perms", perms, "--ro-bind-data", strconv.Itoa(fileFDs[i]), WorkDir+"/"+f.Name)
	}
	a = append(a,
		"--remount-ro", "/",
		"--chdir", WorkDir,
		"--seccomp", strconv.Itoa(seccompFD),
	)
	return a
}

// command is what bubblewrap runs (bubblewrap reads it from its command
// line, not from --args): the prologue, then the program.
func command(spec *Spec, lim Limits) []string {
	c := []string{"--", "/bin/sh", "-c", prologue(lim, spec.Egress != nil), "sh", spec.Program}
	return append(c, spec.Args...)
}

// prologue is the shell script that runs first inside the sandbox: it sets
// the rlimits (dash's ulimit takes one limit per call), says on fd 3 that it
// started, closes fd 3, and execs the program. If a limit cannot be set, the
// program does not run. (bubblewrap closes the other descriptors it was
// handed once it has read them.)
//
// Rlimits are per process: Memory caps each process's address space, so a
// sandbox holds at most Processes × Memory (there is no cgroup here).
// CPU time: the soft limit sends SIGXCPU to the program's children; the
// program itself, as pid 1 of its namespace, ignores signals it has no
// handler for, so the hard limit a second later SIGKILLs it. Likewise a
// file grown past FileSize fails with EFBIG rather than SIGXFSZ. The limit
// is named from the exit status, the CPU time used or the program's own
// report (limitFromExit).
func prologue(lim Limits, relay bool) string {
	cpu := max(1, int64((lim.CPUTime+time.Second-1)/time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "ulimit -S -t %d && ulimit -H -t %d && ", cpu, cpu+1)
	fmt.Fprintf(&b, "ulimit -v %d && ", max(1, lim.Memory/1024))
	fmt.Fprintf(&b, "ulimit -p %d && ", lim.Processes)
	fmt.Fprintf(&b, "ulimit -f %d && ", max(1, lim.FileSize/512))
	b.WriteString("ulimit -c 0 || { echo 'babel-sandbox: cannot set resource limits' >&2; exit 121; }\n")
	if relay {
		b.WriteString(relayCommand())
	}
	b.WriteString("echo started >&3\nexec 3>&-\nexec \"$@\"\n")
	return b.String()
}

// limitFromExit names the limit a finished program ran into, if any. The
// kernel says so for CPU time (SIGXCPU, or SIGKILL at the hard limit) and
// file size (SIGXFSZ); memory and processes show as failed allocations and
// forks, which programs report in their own words on stderr.
func limitFromExit(res *Result, lim Limits, st *os.ProcessState) string {
	switch res.ExitCode {
	case 0:
		return ""
	case 128 + int(syscall.SIGXCPU):
		return LimitCPUTime
	case 128 + int(syscall.SIGXFSZ):
		return LimitFileSize
	case 128 + int(syscall.SIGKILL):
		if st.UserTime()+st.SystemTime() >= lim.CPUTime {
			return LimitCPUTime
		}
	}
	msg := tail(res.Stderr, 4096)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc", "memory exhausted"):
		return LimitMemory
	case has("can't start new thread", "Cannot fork", "can't fork", "fork: Resource temporarily unavailable") ||
		(has("Resource temporarily unavailable") && has("fork", "BlockingIOError", "thread")):
		return LimitProcesses
	case has("File too large", "No space left on device"):
		return LimitFileSize
	}
	return ""
}

// readStarted reports whether the prologue said it started (after the
// sandbox is gone, so the pipe is at EOF or holds the word).
func readStarted(r *os.File) bool {
	_ = r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var buf [16]byte
	n, _ := r.Read(buf[:])
	return n > 0
}

// fdSet collects the descriptors handed to bubblewrap; the i-th is fd 3+i
// in the child.
type fdSet struct{ files []*os.File }

func (s *fdSet) add(f *os.File) int {
	s.files = append(s.files, f)
	return 2 + len(s.files)
}

func (s *fdSet) reserve() int { return s.add(nil) }

// memfd adds an in-memory file holding data, positioned at its start.
func (s *fdSet) memfd(name string, data []byte) (int, error) {
	fd := s.reserve()
	return fd, s.fill(fd, name, data)
}

func (s *fdSet) fill(fd int, name string, data []byte) error {
	mfd, err := unix.MemfdCreate("babel-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return &SetupError{Kind: KindOS, Reason: "memfd: " + err.Error(), Err: err}
	}
	f := os.NewFile(uintptr(mfd), "babel-"+name)
	s.files[fd-3] = f
	if _, err := f.Write(data); err != nil {
		return &SetupError{Kind: KindOS, Reason: "memfd: " + err.Error(), Err: err}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return &SetupError{Kind: KindOS, Reason: "memfd: " + err.Error(), Err: err}
	}
	return nil
}

// hostFile adds the regular host file at p, opened for reading, for
// bubblewrap to copy into the sandbox; a file to be executed must be
// executable on the host too, checked on the file opened (so a file
// swapped in since the caller looked is not copied in its stead).
// O_NONBLOCK keeps a FIFO from blocking the open; it does nothing to a
// regular file.
func (s *fdSet) hostFile(p string, executable bool) (int, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return 0, &SetupError{Kind: KindOS, Reason: err.Error(), Err: err}
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", p)
	case executable && fi.Mode().Perm()&0o111 == 0:
		err = fmt.Errorf("%s is not executable", p)
	}
	if err != nil {
		_ = f.Close()
		return 0, &SetupError{Kind: KindOS, Reason: err.Error(), Err: err}
	}
	return s.add(f), nil
}

func (s *fdSet) close() {
	for i, f := range s.files {
		if f != nil {
			_ = f.Close()
			s.files[i] = nil
		}
	}
}

func nulJoin(args []string) []byte {
	var b bytes.Buffer
	for _, a := range args {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// killer stops a sandbox. It SIGKILLs the sandbox's pid 1 (bubblewrap's
// child): the kernel then kills every process of its pid namespace, and
// bubblewrap, seeing its child gone, exits — so nothing is orphaned. Before
// the child exists there is only bubblewrap, and its process group is
// killed instead; if bubblewrap lingers, exec.Cmd's WaitDelay kills it.
// waitGone then waits for the killed pid 1 to have finished dying.
type killer struct {
	mu     sync.Mutex
	pidfds []int
}

func (k *killer) kill(pid int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	killed := false
	for _, child := range childrenOf(pid) {
		fd, err := unix.PidfdOpen(child, 0)
		if err != nil {
			continue
		}
		k.pidfds = append(k.pidfds, fd)
		if unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			killed = true
		}
	}
	if killed {
		return nil
	}
	return unix.Kill(-pid, unix.SIGKILL)
}

func (k *killer) waitGone(timeout time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for _, fd := range k.pidfds {
		for {
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				break
			}
			if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms); err != unix.EINTR {
				break
			}
		}
		_ = unix.Close(fd)
	}
	k.pidfds = nil
}

// closeOnExecInherited marks close-on-exec every descriptor of this process
// that lacks the flag. Go opens all its files close-on-exec, and os/exec
// hands a child only the descriptors it is told to; but a descriptor this
// process inherited without the flag would pass through bubblewrap into the
// sandbox. Such a descriptor was leaked to us; it is not ours to pass on.
func closeOnExecInherited() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile, or already marked
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return err
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// procStat returns the parent and process group of pid.
func procStat(pid int) (ppid, pgid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	return ppid, pgid, err1 == nil && err2 == nil
}
