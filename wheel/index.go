package wheel

import (
	"math/bits"
	"unsafe"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// index maps a Key to its node with open addressing and linear probing. Each
// entry is the node index with bits of the key's hash on top (its tag), so
// a probe reads the node only on a likely match; 0 is empty (no timer has
// index 0, a sentinel does). The key itself lives in the node. How many
// bits are the tag is the table's (itable.imask): all those the node
// indices it can hold leave, 4 at least (see tagShiftFor). At most 3/4
// full, the index costs 5.3–10.7 bytes per timer, against ~40 for a Go map
// (5/8 took 6.4–12.8: 10.7 at 100M timers, past a budget of 64 bytes per
// timer with the 56-byte node; a miss then probes about 8 entries, half a
// cache line, where 5/8 probed 4). While it moves to a new table (below),
// it holds both: up to 16 bytes per timer as a doubling starts.
//
// A deletion leaves a tombstone, unless it ends its probe run, so it reads
// nothing but its own entry: a backward-shift deletion would read the node of
// every later entry of the run to find its home, a cache miss each in a big
// index (firing a burst of 1M one-shot timers spent a fifth of its time
// there). Tombstones count toward the 3/4 and are reused by insertions.
// Where the live entries are above 3/8 and within 3/4, a purge clears the
// tombstones in place, an insertion at a time, and live entries and
// tombstones may fill 13/16 meanwhile (indexpurge.go).
//
// # Growing without a long turn
//
// When the live entries would pass 3/4, or live entries and tombstones
// would pass 3/4 in a table that does not purge (under purgeMinEntries,
// or the live ones at most 3/8), or 13/16 while a purge runs, the index
// moves to a new table (twice the size when the live
// entries are above 3/8, else the same size, without the tombstones),
// incrementally: the old table is kept, and
// each reserve (each insertion) walks the next migrateStep nodes of the
// slab, putting the key of each live one in the new table. The walk goes
// in the slab's order, so its node reads are sequential (in the old
// table's order, each was a random node, a TLB miss in a big slab); the
// old table is left as it was, its entries of nodes the walk has passed
// stale. Until the walk reaches the slab's high-water mark at the start,
// lookups probe the new table, then the old one (passing its stale
// entries); insertions go to the new. Rehashing every entry in one call
// took 733 ms at 10M timers, a growing wheel's turn far over a tick; now
// no insertion moves more than migrateStep entries (see reserve).
//
// # Where a big table lives
//
// A table is in chunks of at most chunkLen entries (1 MiB). A table of
// mapMinEntries or more is one mapping outside the Go heap (package
// bigmem: huge pages where the kernel allows, since a big index is read at
// random), made when its move starts: the mapping costs a system call, not
// a turn's zeroing (a make of the new table zeroed 512 MiB in one turn at
// 100M timers), and the kernel backs its pages as they are first written.
// A smaller one (up to 16 MiB) is made in the heap when its move starts.
// That is the move's first turns, whose writes land all over the table:
// at 100M timers 512 huge pages of 2 MiB, each zeroed by the kernel at its
// first write. Touching them ahead, from 5/8 full on, kept a doubled table's
// 1 GiB in RAM from 5/8 to 3/4: 10.7 bytes a timer more at 100M. The old
// table is unmapped when its move ends. Where nothing can be mapped
// outside the heap, a big table's chunks are made in the Go heap.
type index struct {
	table itable
	mask  uint64
	count uint32 // live entries, in both tables
	tombs uint32 // tombstones in table
	nodes *slab
	// old is the table being moved from (no chunks: none), oldMask its
	// mask, oldLive its live entries not moved yet. The move walks the
	// slab, not the old table: the nodes below cursor are moved (a live
	// one's entry is in table); a live node from cursor to end (the slab's
	// high-water mark when the move started) has its entry in old, unless
	// fresh says it was handed out since the move started (then in table).
	// An old entry of a node below cursor is stale: look-ups pass it.
	old     itable
	oldMask uint64
	oldLive uint32
	cursor  uint32
	end     uint32
	step    uint32   // the nodes each reserve walks (stepFor)
	fresh   []uint64 // a bit per node below end; nil until a node below end is handed out while moving
	// next is the table mapped ahead of the next move (indexahead.go),
	// nextLen its entries, handOut it until Wheel.IndexAhead hands it
	// out; aheadAt the live entries and tombstones past which reserve
	// maps it.
	next    *bigmem.Mem
	nextLen uint64
	handOut *bigmem.Mem
	aheadAt uint64
	// purgeAt is the next position a purge looks at (indexpurge.go),
	// purgeLeft the positions its pass has left (0: none going on),
	// purgeStep the positions each reserve looks at, and purgeBuf the
	// live entries of a probe run being put back.
	purgeAt   uint64
	purgeLeft uint64
	purgeStep uint64
	purgeBuf  []uint32
}

// itable is an index table: a power of two of entries, in chunks of
// chunkLen entries, or one chunk when smaller. Its entries are a node
// index, the bits of imask (2^shift - 1 for tagShiftFor's shift), and a
// tag in the bits above. A mask, not the shift: a Go shift by a variable
// costs a compare and a mask for shifts of 32 and more (the look-up and the
// move ran 12-19 instructions an add more with one).
type itable struct {
	c     [][]uint32
	imask uint32
	mem   *bigmem.Mem // where c lies when outside the Go heap, else nil
}

// tagShiftFor returns the shift of a new table of size entries for a slab
// of nsent sentinels: node indices up to the size past the sentinels fit
// below it (2^shift > size + nsent), and the bits above are the tag, at
// most 28 (a tag of 4 bits; node indices are below maxNodes = 2^28).
//
// Why that suffices: no table is smaller than the one before it, and each
// holds at most 3/4 of its size in timers, so the timers the slab ever
// held at once, which bound its node indices (it hands out the lowest free
// index), are at most 3/4 of the size, plus the nodes of timers being
// fired, no longer in the index: a quarter of the size to spare. A node
// index that does not fit all the same widens the table (widen):
// correct, and one pass over the table.
//
// Why as wide as it can be: a look-up of a key not in the index (every
// add of a new timer) compares the tag of each entry of its probe run,
// about 7 at 3/4 full, and reads the node of each whose tag matches, a
// cache miss (and a TLB miss) in a big slab. A 4-bit tag had a look-up
// of an absent key read 0.39 nodes (18% of the look-up's time at 10M
// timers, perf); at 10M timers (2^24 entries) the tag is now 7 bits, at
// 300k (2^19) 12, at 25M-50M 5, and at 50M-100M still 4.
func tagShiftFor(size uint64, nsent uint32) uint32 {
	return min(tagShift, uint32(bits.Len64(size+uint64(nsent))))
}

// Chunks of 2^18 entries (1 MiB).
const (
	chunkShift = 18
	chunkLen   = 1 << chunkShift
	chunkMask  = chunkLen - 1
)

// at returns entry p, which must be below len.
func (t *itable) at(p uint64) *uint32 { return &t.c[p>>chunkShift][p&chunkMask] }

// len returns the number of entries, 0 for no table.
func (t *itable) len() uint64 {
	if len(t.c) == 0 {
		return 0
	}
	return uint64(len(t.c)) * uint64(len(t.c[0]))
}

// moving reports whether a move to a new table is going on.
func (x *index) moving() bool { return x.old.c != nil }

// newTable returns a zeroed table of size entries (a power of two).
//
// Its node indices are tagShiftFor's bits, or the table's now when more
// (a table widened keeps them when it moves).
func (x *index) newTable(size uint64) itable {
	imask := max(uint32(1)<<tagShiftFor(size, x.nodes.nsent)-1, x.table.imask)
	m := x.takeAhead(size)
	if m == nil && size >= mapMinEntries {
		m = bigmem.Map(uintptr(size) * 4)
	}
	return itable{c: chunksOf[uint32](m, size), imask: imask, mem: m}
}

// chunksOf returns size items (a power of two) in chunks of chunkLen, or
// in one chunk when fewer, in m (which holds them), or in the Go heap when
// m is nil. A table under chunkLen is mapped only when a test lowers
// mapMinEntries (so that small wheels take that path): it is one chunk of
// size items, as in the heap, never no chunk at all.
func chunksOf[T uint8 | uint32](m *bigmem.Mem, size uint64) [][]T {
	n := min(size, chunkLen)
	c := make([][]T, size/n)
	for i := range c {
		if m == nil {
			c[i] = make([]T, n)
			continue
		}
		b := m.Bytes()[uint64(i)*n*uint64(unsafe.Sizeof(T(0))):]
		c[i] = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	return c
}

const (
	minIndexSize = 64
	// tagShift is the widest shift (see itable): every node index is
	// below 2^28.
	tagShift = 28
	// tomb marks a deleted entry. Node 1 is a sentinel, never a timer, so no
	// live entry has this value.
	tomb = 1
	// noPos is no position.
	noPos = ^uint64(0)
)

// tag returns the hash bits stored in an entry of a table whose node
// indices are imask: the top bits of h, above imask's in its top 32,
// which no table position uses (a position is the low bits, below 2^32
// entries). An entry e has tag tg when (e^tg) <= imask.
func tag(h uint64, imask uint32) uint32 { return uint32(h>>32) &^ imask }

func (x *index) init(nodes *slab) {
	x.nodes = nodes
	x.table = x.newTable(minIndexSize)
	x.mask = minIndexSize - 1
	x.setAheadAt()
}

// hash mixes both halves of the key (a variant of the wyhash/murmur finaliser).
func hash(k Key) uint64 {
	h := k.Receiver*0x9E3779B97F4A7C15 ^ (k.Tid+0x632BE59BD9B4E019)*0xBF58476D1CE4E5B9
	h ^= h >> 31
	h *= 0x94D049BB133111EB
	h ^= h >> 29
	return h
}

// migrateStep is how many nodes of the slab each reserve moves while the
// index is moving to a new table (see reserve for why 4).
const migrateStep = 4

// inOld marks a position lookup returns in the old table (while moving).
const inOld = 1 << 63

// reserve makes room for one more entry, so that a position returned by
// lookup stays valid for insertAt: live entries and tombstones together stay
// at most 3/4 of the table (13/16 while a purge runs), so every probe run
// ends. While moving to a new table it moves the next migrateStep nodes of
// the slab; otherwise it goes on with a purge of tombstones, when one runs,
// and when the entry would pass 3/4, it starts a purge (indexpurge.go) or
// a move.
//
// Why migrateStep = 4 suffices: a move starts with L live entries, at most
// 3/4 of the old table's size S, and walks the slab up to its high-water
// mark, at most about 3/4 S too (tagShiftFor: no table is smaller than
// the one before, each holds at most 3/4 of its size, and the slab hands
// out the lowest free node), so it ends within about 3/16 S insertions.
// Growing (L above 3/8 S), the new table has 2S entries and then holds at
// most L + 3/16 S < S entries, half of it. Rebuilt at the same size (L at
// most 3/8 S), at most 3/8 S + 3/16 S = 9/16 S. Either way below 3/4, so
// no move starts while one is going on. A slab whose high-water mark is
// far above that walks more nodes a reserve (stepFor); and the check
// below finishes a move at once if the table ever were to pass 3/4.
//
// It also makes the table's node indices hold the next one the slab
// hands out (at most its high-water mark): see widen. Here rather than in
// insertAt, which is inlined into Add and would not be with the check.
func (x *index) reserve() {
	if n := x.nodes.n; n > x.table.imask {
		x.widen(uint32(bits.Len32(n)))
	}
	if x.moving() {
		x.migrate(x.step)
		if !x.moving() || x.fits() {
			return
		}
		x.migrate(x.end)
	}
	if x.purgeLeft != 0 {
		x.purge(x.purgeStep)
	}
	if x.aheadLoad() >= x.aheadAt { // (no move is going on here)
		x.mapAhead()
	} else if x.next != nil {
		x.unmapAhead()
	}
	if x.fits() {
		return
	}
	if x.mayPurge() {
		if x.purgeLeft == 0 {
			x.startPurge()
			x.purge(x.purgeStep)
		}
		if x.fitsPurging() {
			return
		}
		x.purge(x.purgeLeft) // the room ran out first: end the pass now
		if x.fitsPurging() {
			return
		}
	}
	x.purgeAt, x.purgeLeft = 0, 0
	size := x.nextSize()
	x.old, x.oldMask, x.oldLive = x.table, x.mask, x.count
	x.cursor, x.end = x.nodes.nsent, x.nodes.n
	x.table, x.mask, x.tombs = x.newTable(size), size-1, 0
	x.setAheadAt()
	x.step = x.stepFor()
	x.migrate(x.step)
}

// stepFor returns how many nodes each reserve walks in the move just
// started: migrateStep, or more when the slab's high-water mark is far
// above the live entries (a slab that held many more timers than the
// index does now, or nodes kept with no key, TestIndexWiden), so that the
// walk ends within half the insertions the table can take before 3/4.
func (x *index) stepFor() uint32 {
	room := (x.mask+1)*3/4 - uint64(x.count) - 1
	walk := uint64(x.end - x.cursor)
	if room < 2 {
		return max(x.end-x.cursor, 1)
	}
	return uint32(max(migrateStep, (walk+room/2-1)/(room/2)))
}

// fits reports whether the table has room for one more entry within 3/4.
func (x *index) fits() bool {
	return uint64(x.count-x.oldLive+x.tombs+1)*4 <= (x.mask+1)*3
}

// migrate moves the next k nodes of the slab (up to end): each live one
// (not marked free: every node the slab handed out and did not get back
// has a key in the index, Add inserting it in the call that takes the
// node) not handed out since the move started has its entry put in the table,
// and drops the old table once the walk reaches end. The old table is
// left as it is: its entries of the nodes below cursor are stale from
// then on, and look-ups pass them (probeOld).
//
// Why the slab's order: the nodes are read one after the other, the
// cache's and the TLB's best case, where a walk of the old table in its
// order read each moved entry's node at random for its key's hash: a
// TLB miss each in a big slab, which made a pipelined add into a growing
// index cost 5-9% more CPU than the one-call rehash before the move was
// incremental (docs/BENCHMARKS.md). The price: while moving, the look-up
// of a key not in the table probes the old table's whole run.
func (x *index) migrate(k uint32) {
	stop := x.end
	if k < x.end-x.cursor {
		stop = x.cursor + k
	}
	for i := x.cursor; i < stop; i++ {
		if n := x.nodes.get(i); n.wprev != markFree && !x.isFresh(i) {
			x.oldLive--
			x.put(n, i)
		}
	}
	x.cursor = stop
	if stop == x.end {
		x.old.mem.Free()
		x.old, x.oldMask, x.oldLive, x.cursor, x.end, x.step, x.fresh = itable{}, 0, 0, 0, 0, 0, nil
	}
}

// isFresh reports whether node i was handed out since the move started,
// below end: its key went to the table.
func (x *index) isFresh(i uint32) bool {
	w := i / 64
	return w < uint32(len(x.fresh)) && x.fresh[w]&(1<<(i%64)) != 0
}

// noteNew is called for each node i the slab hands out for a key the
// index gets (Add): while moving, one at or past cursor and below end
// (end is 0 but while moving) is fresh (markFresh).
func (x *index) noteNew(i uint32) {
	if i < x.end && i >= x.cursor {
		x.markFresh(i)
	}
}

// markFresh notes that node i, at or past cursor and below end, was
// handed out while moving (noteNew): the walk must not put its key in the
// table again when it reaches it, and the old table holds no entry of it
// (its last key's entry was deleted, a tombstone, when it was freed).
// Out of line, so that insertAt stays inlined into Add.
//
//go:noinline
func (x *index) markFresh(i uint32) {
	if x.fresh == nil {
		x.fresh = make([]uint64, x.end/64+1)
	}
	x.fresh[i/64] |= 1 << (i % 64)
}

// lookup returns k's position and node index, or, when k is absent, the
// position in the table where it would go (the first tombstone or the empty
// entry that ends its probe run) and 0. While moving, a key found in the old
// table has its position marked inOld.
func (x *index) lookup(k Key) (pos uint64, i uint32) {
	return x.lookupHash(k, hash(k))
}

// lookupHash is lookup with h == hash(k) already computed. It probes the
// table itself, as probe does (a call of probe cost a quarter of an add's
// look-up), and the old table, while moving, through lookupOld.
func (x *index) lookupHash(k Key, h uint64) (pos uint64, i uint32) {
	im := x.table.imask
	tg := tag(h, im)
	free := noPos
	for p := h & x.mask; ; {
		c := x.table.c[p>>chunkShift]
		base := p &^ chunkMask
		for j := p - base; j < uint64(len(c)); j++ {
			e := c[j]
			if e <= tomb { // empty or a tombstone
				if free == noPos {
					free = base + j
				}
				if e != 0 {
					continue
				}
				if x.moving() {
					return x.lookupOld(k, h, free)
				}
				return free, 0
			}
			if e^tg > im {
				continue
			}
			if n := x.nodes.get(e & im); n.receiver == k.Receiver && n.tid == k.Tid {
				return base + j, e & im
			}
		}
		p = (base + uint64(len(c))) & x.mask
	}
}

// position returns the position of the entry of node i, whose key hashes
// to h and is in the index, as lookup would (marked inOld in the old
// table). It is lookup for a removal by node (a last firing, CancelAll):
// the entry is tag|i exactly, so each one probed is one comparison and no
// node is read. While moving, i's entry is in the old table only if it is
// not in the table, where it is looked for first (a stale old entry of i,
// moved already, is never reached).
func (x *index) position(h uint64, i uint32) uint64 {
	want := tag(h, x.table.imask) | i
	for p := h & x.mask; ; {
		c := x.table.c[p>>chunkShift]
		base := p &^ chunkMask
		for j := p - base; j < uint64(len(c)); j++ {
			switch c[j] {
			case want:
				return base + j
			case 0:
				return x.positionOld(h, i)
			}
		}
		p = (base + uint64(len(c))) & x.mask
	}
}

// positionOld ends position for a node whose entry is not in the table:
// its position in the old table, marked inOld. It panics when there is no
// old table or no entry (i not in the index: a broken invariant, which
// deleteAt at another position would turn into a lost key).
func (x *index) positionOld(h uint64, i uint32) uint64 {
	if !x.moving() {
		panic("wheel: a removed node's key is not in the index")
	}
	t, m := &x.old, x.oldMask
	want := tag(h, t.imask) | i
	for p := h & m; ; {
		c := t.c[p>>chunkShift]
		base := p &^ chunkMask
		for j := p - base; j < uint64(len(c)); j++ {
			switch c[j] {
			case want:
				return (base + j) | inOld
			case 0:
				panic("wheel: a removed node's key is not in the index")
			}
		}
		p = (base + uint64(len(c))) & m
	}
}

// lookupOld ends lookupHash for a key absent from the table while moving:
// its position in the old table, marked inOld, when it is there, else free.
func (x *index) lookupOld(k Key, h, free uint64) (pos uint64, i uint32) {
	if p, j := x.probeOld(k, h); j != 0 {
		return p | inOld, j
	}
	return free, 0
}

// probeOld looks k up in the old table while moving, from its home, as
// probe does, passing the stale entries (of nodes below cursor, moved
// already), and returns 0 for its node index when k is not there.
func (x *index) probeOld(k Key, h uint64) (pos uint64, i uint32) {
	t, m := &x.old, x.oldMask
	im := t.imask
	tg := tag(h, im)
	for p := h & m; ; {
		c := t.c[p>>chunkShift]
		base := p &^ chunkMask
		for j := p - base; j < uint64(len(c)); j++ {
			e := c[j]
			if e == 0 {
				return 0, 0
			}
			if e == tomb || e^tg > im || e&im < x.cursor {
				continue
			}
			if n := x.nodes.get(e & im); n.receiver == k.Receiver && n.tid == k.Tid {
				return base + j, e & im
			}
		}
		p = (base + uint64(len(c))) & m
	}
}

// insertAt stores node i, whose key hashes to h, at the position pos
// returned by lookup for an absent key.
//
// i must be at most the slab's high-water mark when reserve was called
// (reserve widened the table for it): a node the slab handed out since.
func (x *index) insertAt(pos, h uint64, i uint32) {
	e := x.table.at(pos)
	if *e == tomb {
		x.tombs--
	}
	*e = tag(h, x.table.imask) | i
	x.count++
}

// widen makes the table's node indices the bits below shift, more than
// they are, so that node indices below 2^shift fit: each live entry loses
// the low bits of its tag, in place (tag keeps the top bits of the hash,
// so the entry is then what insertAt would have made). Nothing moves, so
// positions stay valid.
// It reads the whole table in one call; tagShiftFor's margin keeps it from
// being called unless the slab's high-water mark passes the table's size
// (see there). The old table, while moving, keeps its own: entries go
// from it to the table (put), whose node indices are at least as wide.
func (x *index) widen(shift uint32) {
	keep := x.table.imask
	drop := uint32(1)<<shift - 1
	for _, c := range x.table.c {
		for j, e := range c {
			if e > tomb {
				c[j] = e&^drop | e&keep
			}
		}
	}
	x.table.imask = drop
}

// deleteAt removes the entry at position p (as lookup returned it). In the
// table: a tombstone, or, when p ends its probe run, empty, together with
// the tombstones just before it (no probe needs to pass them any more). In
// the old table: always a tombstone (the old table's tombstones are not
// counted; it is dropped once moved).
func (x *index) deleteAt(p uint64) {
	x.count--
	if p&inOld != 0 {
		*x.old.at(p &^ inOld) = tomb
		x.oldLive--
		return
	}
	t := &x.table
	c, j := t.c[p>>chunkShift], p&chunkMask
	var next uint32
	if j+1 < uint64(len(c)) {
		next = c[j+1]
	} else {
		next = *t.at((p + 1) & x.mask)
	}
	if next != 0 {
		c[j] = tomb
		x.tombs++
		return
	}
	c[j] = 0
	for q := (p - 1) & x.mask; *t.at(q) == tomb; q = (q - 1) & x.mask {
		*t.at(q) = 0
		x.tombs--
	}
}

// put stores node i, whose key is in neither table, in the first free
// entry (empty, or a tombstone it reuses) of its probe run in the table,
// read a chunk at a time as probe does.
func (x *index) put(n *node, i uint32) {
	h := hash(Key{n.receiver, n.tid})
	for p := h & x.mask; ; {
		c := x.table.c[p>>chunkShift]
		base := p &^ chunkMask
		for j := p - base; j < uint64(len(c)); j++ {
			if e := c[j]; e == 0 || e == tomb {
				if e == tomb {
					x.tombs--
				}
				c[j] = tag(h, x.table.imask) | i
				return
			}
		}
		p = (base + uint64(len(c))) & x.mask
	}
}

// find returns the node index of k, or 0 when absent.
func (x *index) find(k Key) uint32 {
	_, i := x.lookup(k)
	return i
}
