package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling thread (the goroutine is
// locked to it): a turn's own work, whatever other processes of a busy
// machine take.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadFaults returns the page faults the calling thread took (minor:
// memory mapped without I/O, such as a first touch of fresh heap).
func threadFaults() (minor int64) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt) // int32 on 32-bit Linux
}
