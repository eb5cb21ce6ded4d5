package server

import (
	"os"
	"runtime/debug"
	"time"

	"github.com/tickwheel/tickwheel/wheel"
)

// The collector's pace for a heap of many timers.
//
// At the runtime's default (GOGC=100) the heap grows to twice what was
// live at the last collection before the next one. That room is there
// for garbage, but a server's live heap is mostly its timers' node pages
// and index, which it makes little garbage beside (1.0 GB allocated in all
// for 0.70 GB of heap at 9.7M timers added): the room fills with new
// timers and the garbage of hours, and the process holds up to twice its
// timers. RSS was 79–128 bytes a timer while adding 10M timers, 67.6–107.5
// at 100M (by where the count fell between two collections), against about
// 64 for the timers themselves. The memory limit (memlimit.go) does
// not stop that: it counts the budgets' 1.9 GiB at their defaults and a
// quarter on top of the timers.
//
// So, unless the operator set GOGC or gc_percent, the server sets GOGC
// (debug.SetGCPercent) from the bytes it counts for its timers (what the
// memory limit derives from: memTimerBytes a timer, their data, groups)
// that are in the heap (heapLive: on Linux a big wheel's nodes and index
// tables are mapped outside it):
//
//	gc_percent = 100 × gcRoom / timers' bytes in the heap, between gcPercentMin and 100
//
// that is 100 (the default) up to gcRoom of timers (1M timers without
// data), then a room of gcRoom over the live heap, and never less than
// gcPercentMin of it (10%, from 10.5M timers in the heap: 0.64 GB at 100M
// where the arrays are in the heap). A collection costs CPU in proportion
// to the live heap, but the timers' pages hold no pointers: they are
// marked, not scanned (75–150 ms of CPU at 10M timers, 63–273 ms at
// 60–96M), on the runtime's workers beside the event loop. While the
// timers grow, a collection comes every time the heap grows by gc_percent;
// without growth, as often as the garbage fills the room. The cost of the
// small room: an allocation of the loop's that is big (the barrier's claim
// words that Freeze allocates when the wheel outgrew them, 22 MB at 72M
// timers) and falls at the start of a collection makes the loop do mark
// work first: one snapshot's loop pause of 228 ms while adding 100M timers
// with the arrays in the heap (docs/BENCHMARKS.md, "RSS per timer at 100M
// in the server").
//
// gcRoom was 256 MiB until the arrays moved out of the heap. With them
// out, the heap of a server of 100M timers is about 200 MB (its first 2M
// timers' nodes, receivers, sessions, the journal's queue), and a room of
// 256 MiB counted against the estimate (373 MB) let it hold about 210 MB
// of garbage as a bulk add ended. With 64 MiB the heap was 305 MB there
// instead of 385, and RSS 0.7 bytes a timer less: 63.0–63.3 at 100M over
// 100,000 receivers, against 63.8–64.0 ("The collector's room at 100M",
// docs/BENCHMARKS.md). The server makes little garbage (377 MB allocated
// in all while adding 100M timers), so a room of 64 MiB costs few
// collections, and each marks that small heap.
//
// When the collector takes too much CPU, the memory limiter lifts its
// limit for a minute (memlimit.go); the pace goes back to 100 with it, so
// that a load making much garbage is not collected back to back either.

const (
	gcRoom       = 64 << 20
	gcPercentMin = 10
	gcPercentMax = 100
)

// gcPacer sets the collector's pace. Owned by the goroutine that returns
// memory (memreturn.go), but for start (Start).
type gcPacer struct {
	mode  string // "derived", "config", "GOGC" or "off"
	set   int    // the percent set last (0: none set by the server)
	prior int    // the percent before the server set one, for stop
	rest  gcRest // the collector off while the heap is at rest (gcrest.go)
}

// gcPaceMode returns how the pace is chosen: by the GOGC environment
// variable (the runtime has read it: the server leaves it), off
// (gc_percent negative: the runtime's default), the configured percent, or
// derived.
func gcPaceMode(configured int) string {
	switch {
	case os.Getenv("GOGC") != "":
		return "GOGC"
	case configured < 0:
		return "off"
	case configured > 0:
		return "config"
	}
	return "derived"
}

// heapLive returns the bytes the server counts for its timers that live in
// the Go heap: the nodes and index tables of a big wheel are mapped outside
// it (wheel.MappedBytes), where the collector neither sees nor paces them.
func (s *Server) heapLive() int64 { return max(s.memLive.Load()-wheel.MappedBytes(), 0) }

// derivedGCPercent returns GOGC for live bytes of timers (see above).
func derivedGCPercent(live int64) int {
	if live <= gcRoom {
		return gcPercentMax
	}
	return int(max(gcRoom*gcPercentMax/live, gcPercentMin))
}

// want returns the percent to set now, or 0 for none; lifted reports
// whether the memory limit is lifted for the collector's CPU.
func (g *gcPacer) want(s *Server, lifted bool) int {
	switch g.mode {
	case "config":
		return s.cfg.GCPercent
	case "derived":
		if lifted {
			return gcPercentMax
		}
		return derivedGCPercent(s.heapLive())
	}
	return 0
}

// start sets the first pace and logs it (Start published the recovered
// timers before the loop ran).
func (g *gcPacer) start(s *Server) {
	g.mode = gcPaceMode(s.cfg.GCPercent)
	if v := g.want(s, false); v > 0 {
		g.prior = debug.SetGCPercent(v)
		g.set = v
	}
	s.log.Info("garbage collector pace", "mode", g.mode, "gc_percent", g.set, "timers_and_data", s.memLive.Load())
}

// update sets the pace again when what it derives from moved it by 1/8 at
// least, or to either end. Every second; lifted as for want.
// Then the collector rests, or wakes, by the heap's allocations (gcrest.go).
func (g *gcPacer) update(s *Server, lifted bool) {
	g.repace(s, lifted)
	g.rest.step(g.set)
}

// repace is update's change of the percent (while the collector rests it
// is only noted: the rest's end sets it).
func (g *gcPacer) repace(s *Server, lifted bool) {
	v := g.want(s, lifted)
	if v <= 0 || v == g.set {
		return
	}
	if g.set > 0 && v > gcPercentMin && v < gcPercentMax && absDiff(int64(v), int64(g.set))*8 < int64(g.set) {
		return
	}
	switch {
	case g.set == 0:
		g.prior = debug.SetGCPercent(v)
	case !g.rest.resting:
		debug.SetGCPercent(v)
	}
	s.log.Debug("garbage collector pace", "gc_percent", v, "was", g.set)
	g.set = v
}

// stop puts back the pace the process had before start set one.
func (g *gcPacer) stop() {
	g.rest.resting = false
	if g.set > 0 {
		debug.SetGCPercent(g.prior)
		g.set = 0
	}
}

// isLifted reports whether the memory limit is lifted at now.
func (m *memLimiter) isLifted(now time.Time) bool {
	return !m.lifted.IsZero() && now.Before(m.lifted)
}
