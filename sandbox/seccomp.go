package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls lists the syscalls the os sandbox refuses (EPERM).
// Sandboxed code has no business with the kernel's attack surface for
// debugging, namespaces, mounts, modules, eBPF, io_uring, keyrings or the
// clock; the capability drop already refuses most of them, the filter
// refuses them whatever the capabilities.
func deniedSyscalls() []string {
	return []string{
		"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"unshare", "setns",
		"mount", "umount2", "pivot_root", "chroot", "mount_setattr",
		"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
		"open_by_handle_at", "name_to_handle_at",
		"kexec_load", "kexec_file_load", "reboot",
		"init_module", "finit_module", "delete_module",
		"bpf", "perf_event_open", "userfaultfd",
		"keyctl", "add_key", "request_key",
		"swapon", "swapoff", "acct", "quotactl", "syslog", "vhangup",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
		"lookup_dcookie", "personality", "uselib",
	}
}

// namespaceFlags are the clone(2) flags that would make new namespaces.
const namespaceFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// seccompProgram compiles the os sandbox's filter to the raw BPF that
// bubblewrap's --seccomp reads: struct sock_filter entries in native byte
// order.
//
// The filter allows by default and refuses deniedSyscalls, clone with any
// namespace flag, and clone3 (whose flags sit behind a pointer the filter
// cannot read; ENOSYS makes libc fall back to clone). go-seccomp-bpf lets a
// foreign architecture through to the default action, and on x86-64 the
// 32-bit ABI (int 0x80) has its own syscall numbers, so a prologue kills
// any syscall not made through the native ABI.
func seccompProgram() ([]byte, error) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return nil, fmt.Errorf("seccomp filter: unsupported architecture %s", runtime.GOARCH)
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls()}, // ActionErrno alone is EPERM
			{
				Action: seccomp.ActionErrno,
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "clone",
					Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}},
				}},
			},
			{Action: seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)), Names: []string{"clone3"}},
		},
	}
	body, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	auditArch := uint32(unix.AUDIT_ARCH_X86_64)
	if runtime.GOARCH == "arm64" {
		auditArch = unix.AUDIT_ARCH_AARCH64
	}
	prog := append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
	}, body...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.NativeEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}
