//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processRuns reports whether process pid exists (one of another user's
// counts: signal 0 then fails with EPERM).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
