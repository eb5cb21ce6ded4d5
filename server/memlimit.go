package server

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/tickwheel/tickwheel/wheel"
)

// A soft memory limit derived from the budgets.
//
// The byte budgets bound the bytes the server counts, but the Go collector
// lets the heap grow to about twice what is live before it collects
// (GOGC=100): 100 sessions that never read held RSS at 2.2× their budgets.
// Unless the operator set GOMEMLIMIT, or memory_limit says otherwise, the
// server sets the runtime's soft memory limit (debug.SetMemoryLimit) to
// what its budgets allow, so the collector runs harder only as the heap
// nears that, and GOGC's default pace holds below it:
//
//	5/4 × (max_backlog_bytes_total + max_outbox_bytes_total + max_outbound_total)
//	+ 5/4 × (live timers × memTimerBytes + their data bytes)
//	+ open connections × (max_frame + memConnBytes)
//	+ memLimitBase
//
// The quarter on top of the budgets is their slack: the chunks the
// backlogs' events lie in, gnet's power-of-two buffers, and room for the
// collector not to run back to back when the budgets are full. The
// connections' part is what each may hold beyond the budgets (a partial
// request frame, its buffers). memLimitBase covers the rest (the runtime,
// gnet, the log's buffers, receivers' records). The timers and
// connections change, so the goroutine that returns memory (memreturn.go)
// recomputes the limit every second.
//
// The limit is soft: when the live heap is over it (the parts above
// underestimate, or memory_limit is set too low) the runtime runs the
// collector back to back, up to about half the CPU, and the event loop's
// allocations assist it: measured with memory_limit 900 MiB under a live
// heap of about 1.1 GB, 1,565 collections in a minute, the process's CPU
// 5x, events 10 s late. So when the collector took more than
// memGCShareMax of the CPU over the last second, the server lifts the
// limit (GOGC's pace alone) for memLiftFor and logs a warning, then sets
// it again.

const (
	memGCShareMax = 0.15
	memLiftFor    = time.Minute
	memLimitBase  = 64 << 20
	memTimerBytes = 64 // a timer's node, index entry and wheel slot (10M timers: 647 MB of RSS)
	memConnBytes  = 16 << 10
)

// memLimiter decides the process's soft memory limit. Owned by the
// goroutine that returns memory, but for init (Start).
type memLimiter struct {
	mode  string // "derived", "config", "GOMEMLIMIT" or "off"
	set   int64  // the limit set last (0: none set by the server)
	prior int64  // the limit before the server set one, for Stop
	// lifted is until when the limit is lifted (zero: it is not);
	// samples and gcCPU, allCPU the collector's and all CPU seconds at
	// the last look (runtime/metrics).
	lifted        time.Time
	samples       []metrics.Sample
	gcCPU, allCPU float64
}

// memLimitMode returns how the limit is chosen: by the GOMEMLIMIT
// environment variable (the runtime has read it: the server leaves it),
// off (memory_limit negative), the configured bytes, or derived.
func memLimitMode(configured int64) string {
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		return "GOMEMLIMIT"
	case configured < 0:
		return "off"
	case configured > 0:
		return "config"
	}
	return "derived"
}

// derivedMemLimit returns the limit for budgets (the three totals' sum),
// live (timers × memTimerBytes + their data) and conns open connections
// that may each hold a frame of maxFrame bytes.
func derivedMemLimit(budgets, live, conns, maxFrame int64) int64 {
	return budgets + budgets/4 + live + live/4 + conns*(maxFrame+memConnBytes) + memLimitBase
}

// configMemLimit returns the runtime's limit for memory_limit configured
// when the wheels map mapped bytes outside the heap: the runtime's limit
// covers its own memory only. When the mapped bytes take most of the
// limit, a sixteenth of it is left to the heap: past that the collector
// would run back to back for memory it cannot free.
func configMemLimit(configured, mapped int64) int64 {
	return max(configured-mapped, configured/16)
}

// budgetBytes returns the sum of the total byte budgets in l that bound
// queued and outbound events.
func budgetBytes(l *Limits) int64 {
	return int64(l.MaxBacklogBytesTotal) + int64(l.MaxOutboxBytesTotal) + int64(l.MaxOutboundTotal)
}

// publishMemUse notes what the memory limit derives from: the budgets
// (which a reload may change) and the timers' bytes. On the loop, or
// before it runs.
func (s *Server) publishMemUse() {
	w := s.core.Wheel()
	s.memBudgets.Store(budgetBytes(&s.cfg.Limits))
	s.memFrame.Store(int64(s.cfg.Limits.MaxFrame))
	s.memLive.Store(int64(w.Len())*memTimerBytes + int64(w.DataBytes()) + int64(s.core.GroupBytes()))
	s.memMapped.Store(w.MappedBytes())
}

// want returns the limit to set now, or 0 for none.
func (m *memLimiter) want(s *Server) int64 {
	switch m.mode {
	case "config":
		return configMemLimit(s.cfg.MemoryLimit, wheel.MappedBytes())
	case "derived":
		return derivedMemLimit(s.memBudgets.Load(), s.heapLive(), max(s.conns.Load(), 0), s.memFrame.Load())
	}
	return 0
}

// start sets the first limit and logs it (Start published the budgets
// and the recovered timers before the loop ran).
func (m *memLimiter) start(s *Server) {
	m.mode = memLimitMode(s.cfg.MemoryLimit)
	m.prior = debug.SetMemoryLimit(-1)
	if v := m.want(s); v > 0 {
		debug.SetMemoryLimit(v)
		m.set = v
	}
	s.log.Info("memory limit", "mode", m.mode, "limit", debug.SetMemoryLimit(-1),
		"budgets", s.memBudgets.Load(), "timers_and_data", s.memLive.Load())
}

// gcShare returns the collector's share of the CPU since the last call
// (0 when the runtime has not updated its estimates since).
func (m *memLimiter) gcShare() float64 {
	if m.samples == nil {
		m.samples = []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	}
	metrics.Read(m.samples)
	gc, all := m.samples[0].Value.Float64(), m.samples[1].Value.Float64()
	dgc, dall := gc-m.gcCPU, all-m.allCPU
	m.gcCPU, m.allCPU = gc, all
	if dall <= 0 {
		return 0
	}
	return dgc / dall
}

// update sets the limit again when what it derives from moved it by more
// than 1/16, and lifts it while the collector takes too much of the CPU
// (see memGCShareMax). Every second, at now.
func (m *memLimiter) update(s *Server, now time.Time) {
	v := m.want(s)
	if v <= 0 {
		return
	}
	share := m.gcShare()
	if !m.lifted.IsZero() {
		if now.Before(m.lifted) {
			return
		}
		m.lifted, m.set = time.Time{}, 0
		s.log.Info("memory limit set again", "limit", v)
	} else if share > memGCShareMax && m.set > 0 {
		debug.SetMemoryLimit(math.MaxInt64)
		m.lifted = now.Add(memLiftFor)
		s.log.Warn("memory limit lifted: the garbage collector took too much CPU under it", "gc_cpu_share", share,
			"limit", m.set, "for", memLiftFor)
		return
	}
	if m.set > 0 && absDiff(v, m.set) <= m.set/16 {
		return
	}
	debug.SetMemoryLimit(v)
	s.log.Debug("memory limit", "limit", v, "was", m.set)
	m.set = v
}

// stop puts back the limit the process had before start set one.
func (m *memLimiter) stop() {
	if m.set > 0 {
		debug.SetMemoryLimit(m.prior)
		m.set = 0
	}
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}
