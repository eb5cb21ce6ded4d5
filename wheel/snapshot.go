package wheel

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync/atomic"
	"unsafe"
)

// Snapshot format, version 3. A snapshot holds the wheel's observable state
// and nothing of its layout: Now, and every live timer with all it shows
// through Get, List and Advance. Varints are encoding/binary's unsigned
// varints, in their shortest form.
//
//	magic    "TWSN"
//	version  1 byte, SnapshotVersion
//	now      varint
//	count    varint: the number of records that follow
//	records  count of them, in add order (below)
//	due      varints: the firing order of the timers due, and how late each
//	         is (snapshot_due.go)
//	crc      4 bytes, little-endian CRC-32C (Castagnoli) of all the bytes before it
//
// A record is one timer:
//
//	flags     1 byte: recPaused, recSameRecv, recEveryDelay, recRepeat, recFired, recData
//	receiver  varint, absent with recSameRecv (the previous record's receiver;
//	          0 before the first record)
//	tid       varint
//	delay     varint: due - now for an armed timer (0: due, not fired yet),
//	          the remaining ticks for a paused one
//	every     varint >= 1, absent with recEveryDelay (every equals delay)
//	repeat    varint in 1..2^32-1, present with recRepeat (absent: 0, forever)
//	fired     varint >= 1, present with recFired (absent: 0); below repeat
//	          when repeat is set
//	data      varint length >= 1, then the bytes, present with recData
//
// Records come in add order: the order that decides which of the timers
// due on one tick fires first (and List's order), so it is part of the
// state. Each flag is set exactly when its condition holds, so the encoding
// is canonical: two wheels with the same observable state (geometry aside)
// give the same bytes, however their slabs are laid out, and Restore
// rejects any other encoding. The geometry (Config) is not part of the
// state: a snapshot may be restored into any geometry.
//
// Version 2 added the due section: the timers due on one tick no longer
// fire in add order but in rounds by receiver (fair.go), so a snapshot
// taken part-way through a tick says the order of the rest. Version 1
// snapshots are still read (their due timers fire in add order).
//
// Version 3 added each due timer's lateness to the due section: a bounded
// Advance that left timers due lets a later one move time on while they
// wait (fair.go), so a due timer may be due before Now(). Version 2
// snapshots are still read (their due timers are due at Now()).
const SnapshotVersion = 3

var snapMagic = [4]byte{'T', 'W', 'S', 'N'}

// Record flags.
const (
	recPaused     = 1 << iota // the timer is paused; delay is its remaining ticks
	recSameRecv               // receiver is the previous record's, not written
	recEveryDelay             // every equals delay, not written
	recRepeat                 // repeat is written (non-zero)
	recFired                  // fired is written (non-zero)
	recData                   // data is written (non-empty)
	recAll        = 1<<iota - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frozen is the state of a wheel at the instant of a Freeze, which
// encodes into a snapshot (see SnapshotVersion for the format) on any
// goroutine while the wheel goes on.
//
// It shares the wheel's node and extra pages rather than copying them:
// after Freeze, the wheel copies a page before its first write to it (a
// cowArray, versioned per snapshot), so the pages the Frozen reads are
// never written again. Freeze itself costs a copy of the page lists (8
// bytes per 4096 timers), and the wheel pays for the pages it writes while
// a Frozen is not released: at most one copy of each page of 64 nodes (3.5
// KiB) per Freeze.
//
// Concurrency: after Freeze returns, the wheel's owner may use the wheel as
// usual while one other goroutine (or the owner) calls the Frozen's
// methods; the methods of one Frozen must not be called concurrently with
// each other. The pages pass from the owner to the Frozen's goroutine by
// whatever hands that goroutine the Frozen (a go statement, a channel),
// and back when Release (or the garbage collector, for a Frozen that
// becomes unreachable without Release: a runtime cleanup) decrements the
// wheel's count of pins, an atomic: the wheel then writes its pages in
// place again.
//
// Memory: the pages the wheel copied while the Frozen lived, and while
// encoding the list of the timers in add order (8 bytes per timer, 16 when
// the slab is not in add order), which Release (or the end of the
// encoding) lets the garbage collector have.
type Frozen struct {
	now   uint64
	count int    // live timers
	nsent uint32 // the first node that may be a timer
	n     uint32 // the slab's high-water mark: nodes below it may be timers

	nodes  []*cowBlock[node] // the wheel's pages at the Freeze; nil once released
	extras []*cowBlock[extra]
	big    [][]byte // the long payloads, by index, as extras.big
	order  []uint64 // the live timers as order<<32|node index, sorted
	due    []uint32 // the due order section (prepareDue): positions
	// dueLate is each due timer's lateness, in the order of due.
	dueLate []uint64
	st      *frozenState

	// dueFirst is the first node of the due list at the Freeze, dueSent
	// the list's sentinel: a list head, which is not in the frozen pages,
	// while the due timers' own links are.
	dueFirst, dueSent uint32
	// dueRing is, in rotation mode, the ring at the Freeze from its front:
	// each receiver's queue as its first and last node (nil in list mode).
	dueRing [][2]uint32

	// yield, when set, is called every yieldEvery timers of the work
	// before the first record (SetYield).
	yield func()

	// The encoder's position.
	stage    uint8
	next     int // index in order of the next record
	nextDue  int // index in due of the next due order varint
	prevRecv uint64
	crc      uint32
}

// freezeShared is the state a wheel shares with its Frozen copies, the only
// state touched from more than one goroutine.
type freezeShared struct {
	pins atomic.Int32 // Frozen copies not yet released
}

// frozenState is what releasing a Frozen needs: it is also the argument of
// the cleanup that releases an unreachable Frozen, so it must not refer to
// the Frozen.
type frozenState struct {
	shared   *freezeShared
	released atomic.Bool
}

// Encoder stages.
const (
	stageHeader = iota
	stageRecords
	stageDue // the due order section (version 2)
	stageTrailer
	stageDone
)

// Freeze returns the state of the wheel at the call, to be encoded into a
// snapshot. It copies nothing but the lists of the wheel's pages and the
// index of the long data payloads (see Frozen): the loop pauses for tens
// of microseconds at 100M timers (BenchmarkFreeze), and from then on copies
// a page of 64 nodes before its first write to it while the Frozen is not
// released. The long payloads are shared too, and the wheel stops
// recycling freed ones (letting the garbage collector have them) until
// every Frozen is released, so none is overwritten while a Frozen may read
// it. Nothing is sorted or encoded here: that is the Frozen's work, on
// whichever goroutine calls its methods.
//
// The Frozen holds the state at the call: Now, and each live timer with
// its add order as it stands (the wheel may renumber its internal add
// sequence later; the Frozen keeps the numbers it had, which order the
// timers the same way). Freeze may be called from an Advance callback: the
// Frozen then shows the firing timer re-armed or removed, and the timers
// due at Now() not fired yet as due now (delay 0), to fire first after a
// restore.
func (w *Wheel) Freeze() *Frozen {
	if w.frz == nil {
		w.frz = new(freezeShared)
		w.extra.pins = &w.frz.pins
		w.nodes.arr.pins = &w.frz.pins
		w.extra.arr.pins = &w.frz.pins
	}
	w.frz.pins.Add(1) // before the next write: the pages are shared from here
	st := &frozenState{shared: w.frz}
	f := &Frozen{
		now: w.now, count: int(w.index.count), nsent: w.nodes.nsent, n: w.nodes.n,
		nodes:  w.nodes.arr.freeze(w.nodes.nsent),
		extras: w.extra.arr.freeze(0),
		big:    slices.Clone(w.extra.big),
		st:     st,

		dueFirst: w.nodes.get(w.due).wnext, dueSent: w.due,
	}
	if w.rot.on {
		f.dueRing = w.rotRing()
	}
	runtime.AddCleanup(f, (*frozenState).unpin, st)
	return f
}

// Now returns the frozen wheel's Now.
func (f *Frozen) Now() uint64 { return f.now }

// Len returns the number of timers in the Frozen, paused ones included.
func (f *Frozen) Len() int { return f.count }

// Release ends the Frozen's use: the wheel writes its pages in place again
// once every Frozen of it is released, and recycles data buffers again;
// the pages it copied meanwhile, and the Frozen's list of timers, are left
// to the garbage collector. It may be called from any goroutine (not
// concurrently with the Frozen's other methods); a second call does
// nothing. The Frozen cannot encode afterwards: AppendNext and Encode
// panic.
func (f *Frozen) Release() {
	if f.nodes == nil {
		return
	}
	f.nodes, f.extras, f.big, f.order, f.due, f.dueLate, f.dueRing = nil, nil, nil, nil, nil, nil, nil
	f.st.unpin()
}

func (st *frozenState) unpin() {
	if st.released.CompareAndSwap(false, true) {
		st.shared.pins.Add(-1)
	}
}

// AppendNext appends the next piece of the snapshot to dst and returns the
// extended slice, and done == true once the snapshot is complete (its last
// bytes appended by this call). Concatenated, the pieces are the snapshot;
// how it is cut depends only on the max of each call.
//
// Each call appends whole parts (the header, records, the checksum) while
// fewer than max bytes have been appended in this call, so it appends at
// least one part and at most max-1 bytes plus one record (a record is at
// most about 60 bytes plus its data). max <= 0 appends all that is left.
// To write a large snapshot with bounded memory, call it with the same
// buffer, truncated after each write, until done. After done it appends
// nothing. The first call lists the timers in add order: one pass when the
// slab is in that order, else a radix sort (about 10 ms per million
// timers; BenchmarkSortOrder). Encoding runs at about 500-650 MB/s
// (BenchmarkEncode).
func (f *Frozen) AppendNext(dst []byte, max int) (out []byte, done bool) {
	if f.nodes == nil {
		panic("wheel: Frozen used after Release")
	}
	mark := len(dst)    // dst[mark:] is not in the checksum yet
	stop := math.MaxInt // no part starts once len(dst) >= stop
	if max > 0 {
		stop = len(dst) + max
	}
	if f.stage == stageHeader {
		f.prepare()
		dst = append(dst, snapMagic[:]...)
		dst = append(dst, SnapshotVersion)
		dst = binary.AppendUvarint(dst, f.now)
		dst = binary.AppendUvarint(dst, uint64(f.count))
		f.stage = stageRecords
	}
	if f.stage == stageRecords {
		dst = f.appendRecords(dst, stop)
	}
	if f.stage == stageDue {
		dst = f.appendDueOrder(dst, stop)
	}
	f.crc = crc32.Update(f.crc, castagnoli, dst[mark:])
	if f.stage == stageTrailer && len(dst) < stop {
		dst = binary.LittleEndian.AppendUint32(dst, f.crc)
		f.stage = stageDone
	}
	return dst, f.stage == stageDone
}

// Encode appends the rest of the snapshot (all of it on a new Frozen) to
// dst: AppendNext without a limit.
func (f *Frozen) Encode(dst []byte) []byte {
	out, _ := f.AppendNext(dst, 0)
	return out
}

// appendRecords appends records until len(dst) reaches stop or the last
// is appended, after which the stage is stageDue.
func (f *Frozen) appendRecords(dst []byte, stop int) []byte {
	order, nodes := f.order, f.nodes
	const ahead = 8 // prefetch distance: order need not follow the slab
	for f.next < len(order) {
		if len(dst) >= stop {
			return dst
		}
		if j := f.next + ahead; j < len(order) {
			prefetch(unsafe.Pointer(frozenGet(nodes, uint32(order[j]))))
		}
		dst = f.appendRecord(dst, frozenGet(nodes, uint32(order[f.next])))
		f.next++
	}
	f.order = nil // the garbage collector's: 8 bytes per timer
	f.stage = stageDue
	return dst
}

// appendRecord appends the record of the live timer n.
func (f *Frozen) appendRecord(dst []byte, n *node) []byte {
	every, fired := uint64(n.every), uint64(n.fired)
	var data []byte
	if n.hasExtra() {
		x := frozenGet(f.extras, n.every)
		every = x.every
		fired |= uint64(x.firedHi) << 32
		data = payloadOf(x, f.big)
	}
	var flags byte
	delay := n.due - min(n.due, f.now) // 0 for a due timer (its lateness is in the due section)
	if n.wprev == markPaused {
		flags, delay = recPaused, n.due
	}
	if n.receiver == f.prevRecv {
		flags |= recSameRecv
	}
	if every == delay {
		flags |= recEveryDelay
	}
	if n.repeat != 0 {
		flags |= recRepeat
	}
	if fired != 0 {
		flags |= recFired
	}
	if len(data) != 0 {
		flags |= recData
	}
	dst = append(dst, flags)
	if flags&recSameRecv == 0 {
		dst = binary.AppendUvarint(dst, n.receiver)
		f.prevRecv = n.receiver
	}
	dst = binary.AppendUvarint(dst, n.tid)
	dst = binary.AppendUvarint(dst, delay)
	if flags&recEveryDelay == 0 {
		dst = binary.AppendUvarint(dst, every)
	}
	if flags&recRepeat != 0 {
		dst = binary.AppendUvarint(dst, uint64(n.repeat))
	}
	if flags&recFired != 0 {
		dst = binary.AppendUvarint(dst, fired)
	}
	if flags&recData != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(data)))
		dst = append(dst, data...)
	}
	return dst
}

// SetYield makes the encoder call yield every yieldEvery timers of the
// work that precedes the first record (finding the live timers and sorting
// them into add order: milliseconds per million timers), so that an
// encoder sharing one CPU with the wheel's owner can let it run
// (runtime.Gosched). Call it before the first AppendNext.
func (f *Frozen) SetYield(yield func()) { f.yield = yield }

// yieldEvery is how many timers the encoder handles between yields.
const yieldEvery = 1 << 16

// prepare lists the live timers in add order.
func (f *Frozen) prepare() {
	a := make([]uint64, 0, f.count)
	for i := f.nsent; i < f.n; i++ {
		if f.yield != nil && i%yieldEvery == 0 {
			f.yield()
		}
		if n := frozenGet(f.nodes, i); n.wprev != markFree {
			a = append(a, uint64(n.order())<<32|uint64(i))
		}
	}
	if len(a) != f.count {
		panic("wheel: Freeze shared an inconsistent wheel")
	}
	f.order, _ = sortOrder(a, nil, f.yield)
	f.prepareDue()
}

// isSorted is slices.IsSorted, yielding now and then.
func isSorted(a []uint64, yield func()) bool {
	for i := 1; i < len(a); i++ {
		if yield != nil && i%yieldEvery == 0 {
			yield()
		}
		if a[i] < a[i-1] {
			return false
		}
	}
	return true
}

// sortOrder sorts a, entries order<<32|index with distinct orders, using
// tmp as scratch, and returns the sorted entries and the other buffer.
// Sorted input (a restored wheel, timers never reordered by reuse of
// freed nodes) is found in one pass; large input is radix-sorted on the
// bits the orders span, 11 at a time (2 passes for up to 2^22 adds between
// the oldest timer and the newest, 3 for any).
func sortOrder(a, tmp []uint64, yield func()) (sorted, scratch []uint64) {
	if isSorted(a, yield) {
		return a, tmp
	}
	if len(a) < 512 {
		slices.Sort(a)
		return a, tmp
	}
	lo, hi := a[0]>>32, a[0]>>32
	for i, e := range a {
		if yield != nil && i%yieldEvery == yieldEvery-1 {
			yield()
		}
		lo, hi = min(lo, e>>32), max(hi, e>>32)
	}
	if cap(tmp) < len(a) {
		tmp = make([]uint64, len(a))
	}
	tmp = tmp[:len(a)]
	const radix = 11
	var count [1 << radix]int
	for shift := 0; shift < bits.Len64(hi-lo); shift += radix {
		clear(count[:])
		for i, e := range a {
			if yield != nil && i%yieldEvery == yieldEvery-1 {
				yield()
			}
			count[(e>>32-lo)>>shift&(1<<radix-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for i, e := range a {
			if yield != nil && i%yieldEvery == yieldEvery-1 {
				yield()
			}
			d := (e>>32 - lo) >> shift & (1<<radix - 1)
			tmp[count[d]] = e
			count[d]++
		}
		a, tmp = tmp, a
	}
	return a, tmp
}
