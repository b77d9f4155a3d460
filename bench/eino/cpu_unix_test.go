//go:build unix

package eino_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user+system) the process has used so far. Per op
// it shows a benchmark's cost even when other work shares the machine and
// stretches wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
