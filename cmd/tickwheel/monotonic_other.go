//go:build !linux

package main

// monotonicUsec reports no clock: systemd runs on Linux only.
func monotonicUsec() (uint64, bool) { return 0, false }
