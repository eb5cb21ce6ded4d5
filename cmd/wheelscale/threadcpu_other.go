//go:build !linux

package main

import "time"

// threadCPU: the thread's CPU clock is read on Linux only; elsewhere it
// reports 0, so the turn times wheelscale prints mean something on Linux
// only (the machine its figures in docs/BENCHMARKS.md come from).
func threadCPU() time.Duration { return 0 }

// threadFaults returns 0: no per-thread fault count here.
func threadFaults() int64 { return 0 }
