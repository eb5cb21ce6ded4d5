package server

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/tickwheel/tickwheel/wheel"
)

// Giving memory back after connections close in numbers.
//
// The bytes a connection holds (gnet's inbound and outbound buffers, a
// partial frame, unread replies) are freed when it closes, but Go returns
// freed heap to the OS only after a garbage collection, and gnet keeps the
// buffers of closed connections in sync.Pools, which a collection empties
// only at the second cycle after. An idle server runs no collection for
// minutes: 5,000 connections holding a 64 KiB partial frame each left RSS
// at +352 MiB for the 60 s watched after they closed.
//
// So a goroutine looks once every memReturnEvery at the connections. When
// at least memReturnConns have closed since the last return, and at least
// a quarter of those open then and since, and the heap spans more than
// memReturnHeap bytes, it runs two collections and returns the freed
// memory (debug.FreeOSMemory), then waits memReturnGap at least before the
// next. A collection costs CPU in proportion to the live heap (the timers),
// on this goroutine and the runtime's workers, not the event loop's;
// stopping the world takes well under a millisecond.

const (
	memReturnEvery = time.Second
	memReturnGap   = 5 * time.Second
	memReturnConns = 64
)

// memReturnHeap is the heap below which no memory is returned (a variable
// for the tests only).
var memReturnHeap uint64 = 64 << 20

// memReturnRecovered is the snapshot size from which the memory of a
// recovery is returned at start (returnRecovered): below it, what would be
// returned is not worth a collection.
const memReturnRecovered = 8 << 20

// heapSpan returns the bytes of heap the runtime holds from the OS and has
// not released: objects (live or not yet swept), free and unused spans.
func heapSpan(samples []metrics.Sample) uint64 {
	metrics.Read(samples)
	var n uint64
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}

// heapSamples are the runtime/metrics that heapSpan adds up.
func heapSamples() []metrics.Sample {
	return []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
	}
}

// memReturner is the state of returnMemory's decisions. Owned by its
// goroutine.
type memReturner struct {
	closedAt uint64    // connections closed (Server.closed) at the last return
	last     time.Time // the last return
}

// due reports whether memory should be returned now: open connections are
// open, closed have closed since the server started, and the heap spans
// span bytes.
func (m *memReturner) due(now time.Time, open int64, closed, span uint64) bool {
	gone := closed - m.closedAt
	if gone < memReturnConns || gone < (uint64(max(open, 0))+gone)/4 || span < memReturnHeap || now.Sub(m.last) < memReturnGap {
		return false
	}
	m.closedAt, m.last = closed, now
	return true
}

// returnMemory runs until done is closed (see the comment above). It
// first returns what a recovery left (returnRecovered). Once the server has
// been idle for idleSteps looks (and no dropped wheel waits), it rests
// gnet's goroutine pool (gnetpool.go) and sleeps until the server's next
// activity, idleLook (idle.go), or the end of a lift of the memory limit.
func (s *Server) returnMemory(done <-chan struct{}) {
	t := time.NewTimer(memReturnEvery)
	defer t.Stop()
	var m memReturner
	var dropped droppedWheels
	var idle idleWatch
	samples := heapSamples()
	s.returnRecovered(samples)
	for {
		var woken <-chan struct{} // nil: nothing but the timer
		t.Reset(memReturnEvery)
		if a, ok := s.Activity(); idle.step(a, ok) && !dropped.seen {
			s.restGnetPool()
			woken = s.ActivityAfter(a)
			wait := idleLook
			if l := s.memLimit.lifted; !l.IsZero() {
				wait = min(wait, time.Until(l)) // to set the limit again when the lift ends
			}
			t.Reset(wait)
		}
		select {
		case <-done:
			s.memLimit.stop()
			s.gcPace.stop()
			return
		case <-woken:
		case <-t.C:
		}
		s.memStep(time.Now(), &m, &dropped, samples)
	}
}

// memStep is returnMemory's look at the server: the memory limit, the
// collector's pace, a dropped wheel, the connections closed.
func (s *Server) memStep(now time.Time, m *memReturner, dropped *droppedWheels, samples []metrics.Sample) {
	s.memLimit.update(s, now)                    // memlimit.go
	s.gcPace.update(s, s.memLimit.isLifted(now)) // gcpace.go
	dropped.check(s, now)
	if !m.due(now, s.conns.Load(), s.closed.Load(), heapSpan(samples)) {
		return
	}
	before := heapSpan(samples)
	runtime.GC() // the pools' buffers move to their victim caches
	debug.FreeOSMemory()
	s.log.Info("memory returned after connections closed", "heap_before", before, "heap_after", heapSpan(samples),
		"open", s.conns.Load())
}

// A wheel's memory outside the heap (its nodes past the first 2M timers,
// its big index tables: wheel.MappedBytes) is unmapped by a cleanup once
// the wheel is collected. A Core a replica replaces (replica.go), with its
// wheel, is garbage, but an idle server's collector may not run for
// minutes (or at all while it rests, gcrest.go), and at 100M timers that
// is 6 GB of RSS held twice. So each second, when the process maps more
// than the Core's wheel does by droppedMin (a region) or more, and did
// so at the last look too, a collection runs, at most every
// memReturnGap: what the difference is (a dropped wheel; a Frozen being
// encoded; a restore under way) it frees if it can.
const droppedMin = 14 << 20

// droppedWheels is the state of that check. Owned by returnMemory.
type droppedWheels struct {
	seen bool      // the last look saw the difference
	last time.Time // the last collection it ran
}

func (d *droppedWheels) check(s *Server, now time.Time) {
	extra := wheel.MappedBytes() - s.memMapped.Load()
	if extra < droppedMin {
		d.seen = false
		return
	}
	if !d.seen || now.Sub(d.last) < memReturnGap {
		d.seen = true
		return
	}
	d.last = now
	runtime.GC() // the cleanups of what it found unreachable unmap it after
	s.log.Info("collected for memory mapped outside the heap that the Core's wheel does not hold",
		"mapped", extra+s.memMapped.Load(), "wheel", s.memMapped.Load())
}

// returnRecovered returns to the OS, once, the memory a recovery from a
// snapshot used and let go: the decoding's scratch (and, before the
// snapshot was decoded as it is read, session.RestoreFrom, the snapshot
// read into one buffer of its size, about 18 bytes a timer: 1.8 GB at
// 100M timers; since then, RSS at the end of a 100M recovery is about what
// this left before). Nothing refers to them once New has returned, but the collector
// frees them only at its next cycle, which with the heap's goal at twice
// the recovered timers may come long after, and freed heap under that
// goal stays resident: at 100M timers RSS was 83 bytes a timer after a
// restart against about 65 for the timers. Called first by returnMemory,
// so right after the server accepts connections and off the event loop;
// the collection's CPU is proportional to the live heap, mostly
// pointer-free pages that it marks without scanning (about 0.1 s at 10M
// timers).
func (s *Server) returnRecovered(samples []metrics.Sample) {
	if s.recoveredSnapshot < memReturnRecovered {
		return
	}
	began, before := time.Now(), heapSpan(samples)
	debug.FreeOSMemory()
	s.log.Info("memory returned after recovery", "snapshot_bytes", s.recoveredSnapshot, "heap_before", before,
		"heap_after", heapSpan(samples), "took", time.Since(began).Round(time.Millisecond))
}

// populateIndexAhead hands the table the wheel's index mapped ahead of its
// next move (wheel.Wheel.IndexAhead), if any, to a goroutine that backs it
// with memory, so that the move's first writes, all over the table, do not
// each wait on the loop for the kernel to clear a page (at 100M timers a
// 1 GiB table: the loop stood still for 5 s). Runs on the loop after each
// turn, after each record a recovery replays, and after each record a
// cluster follower applies.
func (s *Server) populateIndexAhead() {
	a := s.core.Wheel().IndexAhead()
	if a == nil {
		return
	}
	log := s.log
	go func() {
		began := time.Now()
		ok := a.Populate()
		log.Debug("the index's next table backed with memory ahead of its move", "bytes", a.Bytes(),
			"complete", ok, "took", time.Since(began).Round(time.Millisecond))
	}()
}
