package vfs

import (
	"os"
	"syscall"
)

// datasync flushes f's data and the metadata needed to read it back (its
// size) to the disk: fdatasync(2), which skips the timestamps fsync(2) also
// writes. That is enough for a log that only grows by appending; a new
// segment's directory entry is synced separately (syncDir).
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
