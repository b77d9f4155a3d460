//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package audit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockLog takes an exclusive advisory lock beside the log, so a second
// Writer on the same file, in this process or another, fails at Open rather
// than racing the first for the head.
func lockLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open log: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("audit: open log: %s is already open by another writer", path)
		}
		return nil, fmt.Errorf("audit: open log: lock: %w", err)
	}
	return f, nil
}
