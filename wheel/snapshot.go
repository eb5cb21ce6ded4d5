package wheel

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
)

// Snapshot format, version 6. A snapshot holds the wheel's observable state
// and nothing of its layout but the order its records come in: Now, and
// every live timer with all it shows through Get, List and Advance.
// Varints are encoding/binary's unsigned varints, in their shortest form.
//
//	magic    "TWSN"
//	version  1 byte, SnapshotVersion
//	now      varint
//	count    varint: the number of records that follow
//	records  count of them, in runs (below)
//	due      varints: the firing order of the timers due, and how late each
//	         is (snapshot_due.go)
//	crc      4 bytes, little-endian CRC-32C (Castagnoli) of all the bytes before it
//
// A record is one timer:
//
//	flags     1 byte: recPaused, recSameRecv, recEveryDelay, recRepeat,
//	          recFired, recData, recFirst, recSeqNext
//	receiver  absent with recSameRecv (the previous record's receiver; 0
//	          before the first record of a run, where version 6 does not
//	          allow recSameRecv), else varint: the receiver's id plus 1;
//	          or 0, then the receiver, varint, which this gives the next
//	          id (0 first) while fewer than 2^20 are given (recvid.go)
//	tid       varint
//	seq       varint, absent with recSeqNext (seq is the previous record's
//	          plus 1): the zigzag of seq minus the previous record's seq (0
//	          before the first record of a run), never 1 (that is
//	          recSeqNext); seq is the timer's add sequence number, below
//	          2^31, each timer's its own
//	delay     varint: due - now for an armed timer (0: due, not fired yet),
//	          the remaining ticks for a paused one
//	every     varint >= 1, absent with recEveryDelay (every equals delay)
//	repeat    varint in 1..2^32-1, present with recRepeat (absent: 0, forever)
//	fired     varint >= 1, present with recFired (absent: 0); below repeat
//	          when repeat is set
//	data      varint length >= 1, then the bytes, present with recData
//
// A record with recFirst starts a run: the previous receiver and seq are
// 0 for it (the encoder writes it on the first record only; a reader
// takes it anywhere). The records come in the slab's order as the encoder
// walks it, with the nodes the wheel's owner saved before writing them
// (the write barrier, barrier.go) wherever the encoder found them ready:
// their order says nothing. The add order, which decides which of the timers due on
// one tick fires first and List's order, is the seq numbers' order, and
// the restorer sorts by it. Each flag is set exactly when its condition
// holds; two wheels with the same state may still give different bytes
// (their slabs laid out differently, or their seq numbers apart by
// different gaps): compare restored wheels, not bytes. The geometry
// (Config) is not part of the state: a snapshot may be restored into any
// geometry.
//
// Version 2 added the due section: the timers due on one tick no longer
// fire in add order but in rounds by receiver (fair.go), so a snapshot
// taken part-way through a tick says the order of the rest. Version 3 has
// records in slab order with their seq, so that the encoder needs no list
// of the timers in add order and the wheel's owner can save a node before
// writing it without knowing where its record goes. Version 4 adds each
// due timer's lateness to the due section: a bounded Advance that left
// timers due lets a later one move time on while they wait (fair.go), so
// a due timer may be due before Now(). Versions 1 (records in add order,
// no due section: the due timers fire in add order), 2 (records in add
// order, then the due section) and 3 (no lateness: the due timers are due
// at Now()) are still read. Version 5 adds recSeqNext: in slab order the
// seq mostly goes up by one from a record to the next (the slab is filled
// in add order, and a restore packs it in the snapshot's order), and the
// delta's byte was about one byte of the 18.9 a timer took at 100M timers;
// version 4 (the seq always written) is still read. Version 6 writes a
// receiver met before by its id (recvid.go): at 100M timers of 10,000
// receivers from 2^40, 13.9 bytes a timer where version 5 took 17.9, and
// the restore's index builder links the receivers' lists without a
// look-up a timer; version 5 (each receiver whole) is still read.
const SnapshotVersion = 6

var snapMagic = [4]byte{'T', 'W', 'S', 'N'}

// Record flags.
const (
	recPaused     = 1 << iota // the timer is paused; delay is its remaining ticks
	recSameRecv               // receiver is the previous record's, not written
	recEveryDelay             // every equals delay, not written
	recRepeat                 // repeat is written (non-zero)
	recFired                  // fired is written (non-zero)
	recData                   // data is written (non-empty)
	recFirst                  // the record starts a run (version 3)
	recSeqNext                // seq is the previous record's plus 1, not written (version 5)
	recAll        = 1<<iota - 1
	recAllV4      = recSeqNext - 1
	recAllV2      = recFirst - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frozen is the state of a wheel at the instant of a Freeze, which
// encodes into a snapshot (see SnapshotVersion for the format) on any
// goroutine while the wheel goes on.
//
// It shares the wheel's node pages rather than copying them, and the
// wheel keeps what the Frozen needs of them by a write barrier
// (barrier.go): before its first write to a node whose page the encoder
// has not reached, the wheel saves the node (56 bytes) into a log the
// encoder encodes; a write to a node of the page the encoder is copying
// at that instant waits for the copy. The extras (payloads, long intervals, high firing counts) are
// copied on write a page of 16 at a time (cowArray). Freeze itself costs a
// copy of the page lists (8 bytes per 2048 timers), a claim word per 16
// timers (4 bytes, reused from the previous Frozen, allocated when the
// wheel outgrew them), and a walk of the timers due now not fired yet (none,
// unless an Advance stopped part-way through a tick).
//
// Concurrency: after Freeze returns, the wheel's owner may use the wheel as
// usual while one other goroutine (or the owner) calls the Frozen's
// methods; the methods of one Frozen must not be called concurrently with
// each other. The pages pass from the owner to the Frozen's goroutine by
// whatever hands that goroutine the Frozen (a go statement, a channel);
// each node then belongs to whichever of the two claims it first (an
// atomic compare-and-swap on its page's claim word); the encoder's walk's
// end, and Release (or the
// garbage collector, for a Frozen that becomes unreachable without
// Release: a runtime cleanup), which decrements the wheel's count of pins,
// give them back.
//
// Memory: the nodes the wheel saved and the encoder has not encoded yet
// (56 bytes each, in chunks of 1024 without pointers), and the extras
// pages the wheel copied while the Frozen lived.
type Frozen struct {
	now   uint64
	count int // live timers

	nodes []*cowBlock[node] // the wheel's pages at the Freeze; nil once released
	bar   *barrier
	// due is the due set at the Freeze (the timers due and not fired yet)
	// as seq<<32|position, in firing order until the due stage sorts it;
	// dueLate is how many ticks before Now each was due, in firing order.
	due     []uint64
	dueLate []uint64
	st      *frozenState

	// yield, when set, is called while the encoder waits for the wheel's
	// owner to finish saving a node (SetYield); runtime.Gosched otherwise.
	yield func()

	// The encoder's position.
	stage   uint8
	page    uint32        // the next page of the walk
	expect  uint32        // the nodes the owner saved in the pages walked
	pageBuf cowPage[node] // the page being encoded, copied under its claim
	enc     encoder
	dueRank []uint32 // the due order section (rankDue)
	nextDue int      // index in dueRank of the next due order varint
	crc     uint32
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
	bar      *barrier
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
// snapshot. It copies nothing but the lists of the wheel's pages and of
// the long data payloads, and the due list's order (see Frozen): the loop
// pauses for well under a millisecond at 100M timers (BenchmarkFreeze).
// From then on, until the Frozen's encoder has walked the slab, the wheel
// encodes each node page it writes first that the encoder has not reached
// (barrier.go), and copies an extras page before its first write to it
// while the Frozen is not released. The long payloads are shared too, and
// the wheel stops recycling freed ones (letting the garbage collector have
// them) until every Frozen is released, so none is overwritten while a
// Frozen may read it. Nothing is sorted here.
//
// The Frozen holds the state at the call: Now, and each live timer with
// its add sequence number as it stands (the wheel may renumber later; the
// Frozen keeps the numbers it had, which order the timers the same way).
// Freeze may be called from an Advance callback: the Frozen then shows the
// firing timer re-armed or removed, and the timers due at Now() not fired
// yet as due now (delay 0), to fire first after a restore.
func (w *Wheel) Freeze() *Frozen {
	if w.frz == nil {
		w.frz = new(freezeShared)
		w.extra.pins = &w.frz.pins
		w.nodes.arr.pins = &w.frz.pins
		w.extra.arr.pins = &w.frz.pins
	}
	w.frz.pins.Add(1) // before the next write: the pages are shared from here
	extras := w.extra.arr.freeze(0)
	big := slices.Clone(w.extra.big)
	s := &w.nodes
	s.pruneBars()
	first, end := s.nsent/pageLen, (s.n+pageLen-1)/pageLen
	claims, gen := s.claimsFor(end)
	bar := newBarrier(first, end, s.n, claims, gen)
	s.bars = append(s.bars, bar)
	st := &frozenState{shared: w.frz, bar: bar}
	due, late := w.dueList()
	f := &Frozen{
		now: w.now, count: int(w.index.count),
		nodes:   s.arr.freeze(s.nsent),
		bar:     bar,
		due:     due,
		dueLate: late,
		st:      st,
		enc:     encoder{now: w.now, extras: extras, big: big, fresh: true},
		page:    bar.first,
	}
	runtime.AddCleanup(f, (*frozenState).unpin, st)
	return f
}

// dueList returns the due set in firing order, each timer as
// seq<<32|position (its position in firing order), and how many ticks
// before Now each was due. In list mode the due list is the firing order;
// in rotation mode the ring is run: each receiver's queue's first, in ring
// order, and again (fair.go). It costs O(due) on the owner's goroutine.
func (w *Wheel) dueList() (a, late []uint64) {
	var fire []uint32
	if !w.rot.on {
		for i := w.nodes.get(w.due).wnext; i != w.due; i = w.nodes.get(i).wnext {
			fire = append(fire, i)
		}
	} else {
		ring := w.rotRing()
		cur, end := make([]uint32, len(ring)), make([]uint32, len(ring))
		for k, g := range ring {
			cur[k], end[k] = g[0], g[1]
		}
		for len(cur) > 0 {
			k := 0
			for j, i := range cur {
				fire = append(fire, i)
				if i != end[j] {
					cur[k], end[k] = w.nodes.get(i).wnext, end[j]
					k++
				}
			}
			cur, end = cur[:k], end[:k]
		}
	}
	a, late = make([]uint64, len(fire)), make([]uint64, len(fire))
	for k, i := range fire {
		n := w.nodes.get(i)
		a[k] = uint64(n.order())<<32 | uint64(k)
		late[k] = w.now - n.due
	}
	return a, late
}

// Now returns the frozen wheel's Now.
func (f *Frozen) Now() uint64 { return f.now }

// Len returns the number of timers in the Frozen, paused ones included.
func (f *Frozen) Len() int { return f.count }

// Release ends the Frozen's use: the wheel stops saving nodes for it (if
// its walk was not done) and copies no more extras pages once every
// Frozen of it is released, and recycles data buffers again; what it
// saved or copied meanwhile is left to the garbage collector. It may be
// called from any goroutine (not concurrently with the Frozen's other
// methods); a second call does nothing. The Frozen cannot encode
// afterwards: AppendNext and Encode panic.
func (f *Frozen) Release() {
	if f.nodes == nil {
		return
	}
	f.nodes, f.due, f.dueLate, f.dueRank, f.enc = nil, nil, nil, nil, encoder{}
	f.st.unpin()
}

func (st *frozenState) unpin() {
	if st.released.CompareAndSwap(false, true) {
		st.bar.over.Store(true)
		st.shared.pins.Add(-1)
	}
}

// AppendNext appends the next piece of the snapshot to dst and returns the
// extended slice, and done == true once the snapshot is complete (its last
// bytes appended by this call). Concatenated, the pieces are the snapshot.
//
// Each call appends whole parts (the header, a record of a node the
// wheel saved, a page's records, the checksum) while fewer than max bytes
// have been appended in this call, so it appends at least one part and at
// most max-1 bytes plus a page's records (16 records of at most about 60
// bytes plus their data). max <= 0 appends all that is left. To write a
// large snapshot with bounded memory, call it with the same buffer,
// truncated after each write, until done. After done it appends nothing.
// The call that ends the walk of the slab may wait (yielding, see
// SetYield) for the wheel's owner to finish saving one node.
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

// appendRecords walks the slab's pages, encoding the nodes the wheel's
// owner has not saved, and encodes those it saved between them, until
// len(dst) reaches stop or the last record is appended, after which the
// stage is stageDue.
func (f *Frozen) appendRecords(dst []byte, stop int) []byte {
	b := f.bar
	for {
		var caught bool
		if dst, caught = b.drain(&f.enc, dst, stop); !caught {
			return dst
		}
		if f.page == b.end {
			break
		}
		if len(dst) >= stop {
			return dst
		}
		p := f.page
		saved := b.claimPage(p)
		f.expect += savedCount(saved)
		if saved != allSaved { // the owner waits for this copy
			pg := frozenPage(f.nodes, p)
			for j := range pg {
				if saved&(1<<j) == 0 { // a saved one the owner may be writing
					f.pageBuf[j] = pg[j]
				}
			}
		}
		f.page++
		b.doneTo.Store(f.page) // the owner may write the page in place now
		if saved != allSaved {
			dst = f.enc.appendPage(dst, &f.pageBuf, p, b.n, saved)
		}
	}
	// The walk is done: the owner saves no more nodes. Encode what is
	// left, waiting for the last it claimed to be in the log.
	for {
		var caught bool
		if dst, caught = b.drain(&f.enc, dst, stop); !caught {
			return dst
		}
		if b.drained == f.expect {
			break
		}
		if f.yield != nil {
			f.yield()
		} else {
			runtime.Gosched()
		}
	}
	b.over.Store(true)
	f.stage = stageDue
	return dst
}

// frozenPage returns page p of the blocks a freeze returned.
func frozenPage[T any](blocks []*cowBlock[T], p uint32) *cowPage[T] {
	return blocks[p>>blockShift].page(p & (blockPages - 1))
}

// SetDigest puts the Frozen in digest mode, before the first AppendNext:
// each timer's record is replaced by a 0 byte; its encoding, on its own
// (as the first record of a run), is hashed and the hash added to *sum. The rest (the header with Now and the count, the due order section)
// is appended as usual. The sum does not depend on the order the encoder
// meets the timers, which does (records are in slab order but for the nodes
// the owner saved while the encoder walked, encoded when it saved them, and
// a restore lays them out in the order it reads them): the header, the due
// section and the sum identify the state whatever the slab's layout, for
// comparing two wheels' states (the cluster's state checks). The output is
// not a snapshot.
func (f *Frozen) SetDigest(sum *uint64) { f.enc.sum = sum }

// recordHash is FNV-1a over a record's bytes, mixed (splitmix64's
// finalizer) so that the sum of many is not a linear function of them.
func recordHash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// SetYield makes the encoder call yield instead of runtime.Gosched while
// it waits for the wheel's owner to finish saving a node (at the end of
// its walk of the slab). Call it before the first AppendNext.
func (f *Frozen) SetYield(yield func()) { f.yield = yield }

// encoder encodes records (version 3): the state that runs from one
// record to the next.
type encoder struct {
	now      uint64
	extras   []*cowBlock[extra]
	big      [][]byte
	prevRecv uint64
	prevSeq  uint32
	fresh    bool // the next record starts a run
	// ids maps each receiver given an id to it (in head), nextID the next
	// id to give (recvid.go).
	ids    recvTable
	nextID uint32
	// sum, in digest mode (Frozen.SetDigest), takes the records' hashes
	// instead of the output; scratch holds the record being hashed.
	sum     *uint64
	scratch []byte
}

// appendPage appends the records of the live timers of node page p, pg,
// below the high-water mark n, in slab order, but those whose bit is set
// in skip.
func (e *encoder) appendPage(dst []byte, pg *cowPage[node], p, n, skip uint32) []byte {
	base := p << pageShift
	for j := range pg {
		if base+uint32(j) >= n {
			break
		}
		if skip&(1<<j) != 0 {
			continue // saved by the owner, who may be writing it now
		}
		if nd := &pg[j]; nd.wprev != markFree {
			dst = e.appendRecord(dst, nd)
		}
	}
	return dst
}

// appendRecord appends the record of the live timer n; in digest mode
// (sum set) it appends a 0 byte and adds the record's hash to the sum.
func (e *encoder) appendRecord(dst []byte, n *node) []byte {
	if e.sum != nil {
		e.fresh = true // the record alone, not relative to the one before
		e.scratch = e.encodeRecord(e.scratch[:0], n)
		*e.sum += recordHash(e.scratch)
		return append(dst, 0) // a byte a record: AppendNext's pieces stay bounded
	}
	return e.encodeRecord(dst, n)
}

// encodeRecord appends the record of the live timer n.
func (e *encoder) encodeRecord(dst []byte, n *node) []byte {
	every, fired := uint64(n.every), uint64(n.fired)
	var data []byte
	if n.hasExtra() {
		x := frozenGet(e.extras, n.every)
		every = x.every
		fired |= uint64(x.firedHi) << 32
		data = payloadOf(x, e.big)
	}
	var flags byte
	same := n.receiver == e.prevRecv
	if e.fresh {
		flags, e.prevRecv, e.prevSeq, e.fresh = recFirst, 0, 0, false
		same = n.receiver == 0 && e.sum != nil // a snapshot's first record writes its receiver
	}
	delay := n.due - min(n.due, e.now) // 0 for a due timer (its lateness is in the due section)
	if n.wprev == markPaused {
		flags, delay = flags|recPaused, n.due
	}
	if same {
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
	seq := n.order()
	if seq == e.prevSeq+1 {
		flags |= recSeqNext
	}
	dst = append(dst, flags)
	if flags&recSameRecv == 0 {
		dst = e.appendReceiver(dst, n.receiver)
		e.prevRecv = n.receiver
	}
	dst = binary.AppendUvarint(dst, n.tid)
	if flags&recSeqNext == 0 {
		dst = binary.AppendUvarint(dst, zigzag(int64(seq)-int64(e.prevSeq)))
	}
	e.prevSeq = seq
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

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
