//go:build linux

package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts cmd as a direct child in its own process group.
func (s ProcessStarter) Start(ctx context.Context, cmd *Command) (io.ReadWriteCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	env := make([]string, 0, len(cmd.Env))
	for k, v := range cmd.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	c := exec.Command(cmd.Path, cmd.Args...)
	c.Env = env // never nil: a nil Env would inherit ours
	c.Dir = "/"
	c.Stderr = cmd.Stderr
	c.WaitDelay = time.Second
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	grace := s.Grace
	if grace <= 0 {
		grace = 500 * time.Millisecond
	}
	p := &process{cmd: c, stdin: stdin, stdout: stdout, pgid: c.Process.Pid, grace: grace, exited: make(chan struct{})}
	go p.watch()
	p.stopKill = context.AfterFunc(ctx, func() { p.signal(syscall.SIGKILL) })
	return p, nil
}

// process is a running stdio server.
type process struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   io.ReadCloser
	pgid     int
	grace    time.Duration
	exited   chan struct{} // closed once the leader has exited (not yet reaped)
	stopKill func() bool

	mu     sync.Mutex
	reaped bool
	once   sync.Once
	err    error
}

// watch closes exited when the group leader exits, without reaping it: a
// zombie leader keeps its process group id ours, so signalling the group
// can never reach a stranger's processes.
func (p *process) watch() {
	defer close(p.exited)
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// signal sends sig to the whole process group, unless it was reaped.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(-p.pgid, sig)
	}
}

func (p *process) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close ends the server as the MCP stdio transport asks (close its input,
// wait, SIGTERM, wait, SIGKILL), then kills whatever is left of its
// process group and reaps it.
func (p *process) Close() error {
	p.once.Do(func() {
		p.stopKill()
		_ = p.stdin.Close()
		wait := func() bool {
			t := time.NewTimer(p.grace)
			defer t.Stop()
			select {
			case <-p.exited:
				return true
			case <-t.C:
				return false
			}
		}
		if !wait() {
			p.signal(syscall.SIGTERM)
			wait()
		}
		p.signal(syscall.SIGKILL) // children the server left behind
		<-p.exited
		p.mu.Lock()
		defer p.mu.Unlock()
		p.err = p.cmd.Wait()
		p.reaped = true
	})
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return nil // a server killed on close is not an error of the call
	}
	return p.err
}
