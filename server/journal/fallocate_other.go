//go:build !linux

package journal

import "os"

// fallocate is Linux's: elsewhere segments grow by appending.
func fallocate(f *os.File, off, n int64) error { return errNoFallocate }
