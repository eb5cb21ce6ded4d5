package journal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// fallocate reserves [off, off+n) of f with fallocate(2) mode 0 (the file's
// size grows to off+n if it was smaller).
func fallocate(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Fallocate(int(fd), 0, off, n); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case ferr == nil:
		return nil
	case errors.Is(ferr, syscall.EOPNOTSUPP) || errors.Is(ferr, syscall.ENOSYS):
		return fmt.Errorf("%w: %w", errNoFallocate, ferr)
	}
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: ferr}
}
