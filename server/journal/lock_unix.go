//go:build unix

package journal

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on path (created if missing), so that
// a second process (or Journal) cannot open the same directory.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %s is in use by another journal: %w", path, err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}
