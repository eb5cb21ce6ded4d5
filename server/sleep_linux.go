package server

import (
	"syscall"
	"time"
)

// preciseSleep blocks the calling thread for d with nanosleep(2), bypassing
// the Go runtime's millisecond-grained netpoller timeout. An EINTR ends it
// early; the ticker then recomputes and sleeps again.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
