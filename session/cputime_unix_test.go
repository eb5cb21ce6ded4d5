//go:build unix

package session

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user and system CPU time so far, all
// threads (the benchmarks' cpu-ns/op: on a shared machine wall time
// includes the time other processes held the CPU; CPU time does not).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUTime is cpuTime, for the benchmarks of package session_test.
var CPUTime = cpuTime
