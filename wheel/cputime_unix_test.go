//go:build unix

package wheel

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user and system CPU time so far, all
// threads (the restore benchmark's cpu-ns/timer: on a shared machine wall
// time includes the time other processes held the CPU; CPU time does not).
// 0 when the system does not say.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userCPUTime is cpuTime without the system time: the decoding's own work
// without the kernel's clearing of the pages it first touches (which a
// restore's Prefaulter does on another goroutine).
func userCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano())
}
