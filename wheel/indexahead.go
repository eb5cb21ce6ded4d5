package wheel

import "github.com/tickwheel/tickwheel/wheel/internal/bigmem"

// # The next table mapped ahead
//
// A move's new table is written at random from its first insertions on
// (each lands on any of its pages), so every page of a big table is first
// written within a few thousand insertions, and each first write waits for
// the kernel to back the page with cleared memory. At 100M timers a
// doubling table is 1 GiB; on a virtual machine whose host had taken back
// the free memory, the event loop stood still for 5 s at that point of a
// steady churn of adds and firings (tombstones had pushed the table past
// 3/4), and a replay of the log stood still there too (docs/BENCHMARKS.md,
// "The index's move stalled the loop").
//
// So when the table is within aheadOf entries of starting a move, the
// index maps the table that move would take (the size reserve would pick
// with the live entries of now) and hands it out once (Wheel.IndexAhead)
// for another goroutine to back with memory (Ahead.Populate) while the
// insertions go on. The move takes it if its size is still the one it
// needs, else frees it and maps another. The wheel's values are the same
// either way: the table is zeroed memory, populated or not.

// aheadOf returns how many entries short of 3/4 a table of size entries
// maps the next one ahead: 1/256 of it (at 100M timers 524k entries, 10 s
// of 50k adds a second; a fill at 450k adds a second has a second).
func aheadOf(size uint64) uint64 { return size / 256 }

// Ahead is a table mapped ahead of an index's move, to be backed with
// memory by a goroutine other than the one that owns the wheel.
type Ahead struct {
	m *bigmem.Mem
	n uintptr // its bytes (m's are nil once it is freed)
}

// aheadPiece is how much Populate backs at a time.
const aheadPiece = 8 << 20

// Populate backs the table with memory, a piece at a time, without
// changing its contents: it may run while the wheel's goroutine writes the
// table. It stops early when the table has been freed (its move took
// another size, or the wheel was dropped) or the kernel cannot populate
// (before Linux 5.14), and reports whether it backed all of it.
func (a *Ahead) Populate() bool {
	for off := uintptr(0); off < a.n; off += aheadPiece {
		if !a.m.Populate(off, min(aheadPiece, a.n-off)) {
			return false
		}
	}
	return true
}

// Bytes returns the table's size in bytes.
func (a *Ahead) Bytes() int { return int(a.n) }

// IndexAhead returns, once, the table the index mapped ahead of its next
// move, or nil when there is none to hand out. The caller may back it with
// memory from another goroutine (Ahead.Populate); nothing else of the
// wheel is touched there.
func (w *Wheel) IndexAhead() *Ahead {
	x := &w.index
	if x.handOut == nil {
		return nil
	}
	a := &Ahead{m: x.handOut, n: uintptr(len(x.handOut.Bytes()))}
	x.handOut = nil
	return a
}

// mapAhead maps the table the next move would take, when the table is big
// enough to be mapped outside the heap and none is mapped ahead yet.
// Called by reserve once the table is within aheadOf of 3/4.
func (x *index) mapAhead() {
	x.aheadAt = ^uint64(0) // once per table
	size := x.nextSize()
	if x.next != nil || size < mapMinEntries {
		return
	}
	if x.next = bigmem.Map(uintptr(size) * 4); x.next != nil {
		x.nextLen, x.handOut = size, x.next
	}
}

// nextSize returns the size of the table a move starting now would take.
func (x *index) nextSize() uint64 {
	size := x.mask + 1
	if uint64(x.count+1)*8 > size*3 { // live entries above half the limit: grow
		size *= 2
	}
	return size
}

// takeAhead returns the table mapped ahead when it has size entries, and
// frees it otherwise; nil when there is none.
func (x *index) takeAhead(size uint64) *bigmem.Mem {
	m := x.next
	if m != nil && x.nextLen != size {
		m.Free()
		m = nil
	}
	x.next, x.nextLen, x.handOut = nil, 0, nil
	return m
}

// setAheadAt sets the entries (live and tombstones) past which the table
// maps the next one ahead, for a table just made.
func (x *index) setAheadAt() {
	size := x.mask + 1
	x.aheadAt = size*3/4 - min(aheadOf(size), size*3/4)
}
