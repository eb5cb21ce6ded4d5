//go:build linux

package wheel

import (
	"syscall"
	"time"
)

// threadCPU returns the calling thread's CPU time so far (lock the
// goroutine to its thread around the two calls), 0 when the system does
// not say: how long a goroutine ran, not counting the time others held
// its core.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
