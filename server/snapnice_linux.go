package server

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// idleSupported: the encoder's thread can run at SCHED_IDLE here.
const idleSupported = true

// apply gives the calling goroutine's thread the encoder's scheduling:
// SCHED_IDLE when e.idle, else the nice value e.nice (1-19; 0 or less
// leaves the thread as it is). The goroutine is locked to its thread for
// good: when it returns, the runtime ends the thread, so no other
// goroutine (the event loop) ever runs at that priority. Neither can be
// undone without CAP_SYS_NICE (a thread may not leave SCHED_IDLE, or
// lower its nice value, beyond RLIMIT_NICE, 0 by default), which is why
// the rest of a snapshot past snapshot.idle_max goes on on a goroutine of
// its own (encodeSnapshot).
//
// Why SCHED_IDLE and not a nice value: the kernel (EEVDF, and CFS before
// it) lets a running thread finish its slice before a waking one of the
// same policy, whatever their nice values, so an encoder at nice 10 still
// kept the loop, waking for its tick, waiting for a CPU for up to a slice
// (milliseconds) whenever the other CPU was busy too; a thread of policy
// SCHED_IDLE is preempted by any other at its wake-up, and a CPU running
// only one counts as idle when the kernel places a waking thread
// (docs/BENCHMARKS.md, "Fire lateness while a snapshot is written: the
// cause"). Linux only; elsewhere a no-op (snapnice_other.go).
func (e encoderSched) apply() error {
	if !e.idle && e.nice <= 0 {
		return nil
	}
	runtime.LockOSThread()
	if e.idle {
		return unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
	}
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), min(e.nice, 19))
}
