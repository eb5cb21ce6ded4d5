package main

import "golang.org/x/sys/unix"

// monotonicUsec returns CLOCK_MONOTONIC in microseconds, as systemd wants
// it with RELOADING=1.
func monotonicUsec() (uint64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0, false
	}
	return uint64(ts.Sec)*1_000_000 + uint64(ts.Nsec)/1000, true
}
