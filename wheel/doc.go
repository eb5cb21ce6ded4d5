// Package wheel is tickwheel's engine: a hierarchical timing wheel, the timer
// table above it, and the tw-time clock that says how far to advance it.
//
// # The wheel
//
// A Wheel holds timers keyed by (receiver, tid) and fires them as its time,
// a uint64 tick counter, is advanced:
//
//	w, _ := wheel.New(start, wheel.Config{}) // 10 levels × 100 slots
//	w.Add(wheel.Key{Receiver: 1, Tid: 11}, wheel.Spec{After: 3, Repeat: 4})
//	w.Advance(start+12, 0, func(f *wheel.Fire) {
//		// f.Tick is start+3, +6, +9, +12; f.Last on the fourth firing
//	})
//
// Timers due on the same tick fire in rounds by receiver: each receiver's
// earliest-added one, then each one's second, and so on, each round in the
// order the receivers' first timers were added. So a receiver's own timers
// fire in due order, then add order; timers of receivers with one each in
// plain add order; and one receiver's million timers due on a tick do not
// hold back another receiver's timer due then: it fires in the tick's
// first round. Nor one due on a later tick: when a bounded Advance leaves
// timers due, the next one moves time on a tick and the timers due then
// join the rotation of receivers (fair.go) before it fires. A repeating timer is re-armed from its
// scheduled tick, so it never drifts, and an Advance across k of its periods
// fires it k times, each with its own tick. Time only moves forward.
//
// A Wheel is a value you drive, not a service: it has no goroutines, locks,
// I/O or clock reads, so it is deterministic and its tests never sleep. It is
// not safe for concurrent use; the goroutine that owns it calls every method.
//
// Costs: Add, Cancel, Pause and Resume are O(1); a firing is O(1) plus at
// most one move per level as the timer comes down the wheel; an Advance
// across empty time costs a few bitmap scans however many ticks it crosses;
// a timer without data takes 56 bytes plus 5.3-10.7 of index and 1 of page
// reference, and one with data (or an interval past 2^32) 32 more, its
// payload inside them up to 16 bytes. Nothing is allocated per timer in steady state: timers live in
// slabs addressed by uint32 index, hold no pointers for the garbage
// collector to scan, and freed ones are reused lowest index first, so timers
// added together stay together in memory.
//
// Advance can stop after a given number of firings and continue later from
// the same point, which lets a server bound the work of one loop turn.
// While the wheel catches up that way, AddFrom counts After and At from the
// caller's tw-time rather than the wheel's Now, and returns the due tick.
// Likewise ListPage returns a receiver's timers a page at a time, in tid
// order, for one walk of that receiver's timers per page (about 0.6 ms for
// 100k timers) whatever order they were added in.
//
// # Snapshots
//
// A wheel can be saved and restored, for a service that recovers from a
// snapshot plus a log. Freeze, on the goroutine that owns the wheel, takes
// the state of that instant without copying it: the Frozen shares the
// wheel's pages of timers, and until its encoder has walked them the wheel
// saves a timer (56 bytes) before its first write to it, for the encoder
// (a write barrier; see barrier.go; the extras, a timer's data and long
// intervals, are copied on write a page at a time: cowArray). Freeze costs
// a copy of the page lists (8 bytes per 2048 timers; BenchmarkFreeze), and
// each loop turn during a snapshot the timers it writes first. The Frozen then encodes on any
// goroutine while the wheel goes on, in pieces of bounded size
// (AppendNext), so that a large snapshot streams to a file; Release ends
// the sharing.
//
// A snapshot (format version SnapshotVersion, documented there) holds Now
// and every timer with all it shows (key, add sequence number, due tick or
// remaining ticks when paused, interval, repeat, firings, data), in the
// order the encoder met them, as varints (about 11-15 bytes per timer
// without data), and a checksum. It is independent of the geometry; it is
// not canonical (equal states may give different bytes: compare restored
// wheels). Restore, or a Restorer fed the pieces as they are read (it
// is an io.Writer), builds a wheel that is observably identical to the one
// frozen and freezes to the same bytes, at about 80 ns per timer (0.8 s for
// 10M; BenchmarkRestore). Invalid input is an error, never a panic.
//
// # The clock
//
// A Clock turns monotonic time into a target tick for Advance: start tick +
// elapsed × speed / tick duration + fast-forwarded ticks. It can be frozen,
// resumed without a jump, sped up or slowed down without a jump, and fast-
// forwarded; its target never decreases. It reads time only through the
// Source it is given, so tests drive it by hand.
package wheel
