package server

import (
	"runtime/debug"
	"runtime/metrics"
)

// The collector at rest.
//
// The runtime collects at least every two minutes, whatever was allocated
// (its forced collection), and a collection marks the whole live heap:
// 63-273 ms of CPU at 60-96M timers (gcpace.go), 0.05-0.23% of a core on a
// server that does nothing else, the most of its idle CPU at 100M timers
// (docs/BENCHMARKS.md, "Flat at 100M"). Nothing to collect comes of an
// idle server: so when the server sets the pace (gc_percent derived or
// configured) and the heap has been at rest, under restAlloc bytes
// allocated in each of restAfter seconds in a row, the collector is turned
// off (SetGCPercent(-1): no forced collection either); it is turned on
// again at the pace set, at the first second with more, or once restBudget
// bytes were allocated since the rest began, so a rest holds at most that
// much garbage (the memory limit, when set, still bounds the heap).

const (
	restAlloc  = 1 << 20  // bytes a second at most, at rest
	restAfter  = 10       // seconds under it before the collector rests
	restBudget = 64 << 20 // bytes allocated during a rest before it ends
)

// gcRest is the rest's state. Owned by the goroutine that returns memory
// (memreturn.go), as gcPacer.
type gcRest struct {
	resting bool
	quiet   int    // seconds in a row under restAlloc
	last    uint64 // bytes allocated in all, at the last step
	from    uint64 // at the start of the rest
	// alloc reads the bytes allocated in all, setPercent sets the
	// collector's pace (tests replace them).
	alloc      func() uint64
	setPercent func(int) int
}

// allocatedBytes returns the bytes the heap has allocated in all.
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// step is called every second with the pace the server sets (0: none, the
// runtime's own: no rest). It reports whether the collector rests after it.
func (r *gcRest) step(pace int) bool {
	if r.alloc == nil {
		r.alloc, r.setPercent = allocatedBytes, debug.SetGCPercent
	}
	now := r.alloc()
	d := now - r.last
	r.last = now
	switch {
	case pace <= 0:
		r.wake(pace)
	case r.resting && (d >= restAlloc || now-r.from >= restBudget):
		r.wake(pace)
	case r.resting:
	case d >= restAlloc:
		r.quiet = 0
	default:
		if r.quiet++; r.quiet >= restAfter {
			r.setPercent(-1)
			r.resting, r.from = true, now
		}
	}
	return r.resting
}

// wake ends a rest, putting back pace (when the server sets one).
func (r *gcRest) wake(pace int) {
	if r.resting && pace > 0 {
		r.setPercent(pace)
	}
	r.resting, r.quiet = false, 0
}
