package server

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerPriority gives the calling goroutine's thread the nice value nice
// (1-19; 0 or less leaves it as it is), so that the kernel runs the event
// loop first whenever both want a CPU: the snapshot encoder of 100M timers
// runs for 4-9 s, a candidate for the 9 ms fire lateness p99 was worse by
// while one ran (docs/BENCHMARKS.md, "Flat at 100M"; snapshot.nice, off by
// default: see Config.Snapshot.Nice for its risk). The goroutine is locked to its
// thread for good: when it returns, the runtime ends the thread, so no
// other goroutine ever runs at that priority. Linux only (a thread's nice
// value is its own there); elsewhere a no-op.
func lowerPriority(nice int) error {
	if nice <= 0 {
		return nil
	}
	runtime.LockOSThread()
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), min(nice, 19))
}
