//go:build !linux

package server

import "time"

// preciseSleep is time.Sleep where the runtime's timers are not limited to
// whole milliseconds by epoll_wait.
func preciseSleep(d time.Duration) { time.Sleep(d) }
