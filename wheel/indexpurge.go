package wheel

import "unsafe"

// # Tombstones cleared in place
//
// A table of purgeMinEntries or more whose live entries are above 3/8 of
// it and within 3/4 sheds its tombstones by a purge, in place, rather than
// by a move: a move to a
// table of the same size, or twice it (which a move from above 3/8 would
// take), needs the new table beside the old, and the doubled one stays.
// At 100M timers the table has 2^27 entries and the live ones fill 0.745
// of it, so the first 670k tombstones of a steady churn (a firing of a
// one-shot timer, a cancel: most deletions leave one) doubled it to 1 GiB,
// 10.7 bytes a timer more for good, past a budget of 64 (docs/BENCHMARKS.md,
// "The index sheds its tombstones in place").
//
// A purge is a pass over the whole table, a run of positions at each
// insertion (purgeStep, so that it ends within half the room left below
// 13/16 when it starts), and live entries and tombstones may fill up to
// 13/16 of the table meanwhile: a probe run then is about twice as long.
// Each run of the pass ends at an empty entry, and in each probe run
// (entries between two empty ones) it sees, it empties the entries from
// the first tombstone on and puts the live ones back, in their order, each
// at the first free entry from its home: never past where it was, so the
// probe run stays one, and every entry stays reachable from its home
// through no empty entry. The entries before the first tombstone do not
// move, nor do those of a probe run with none. Putting an entry back reads
// its node for its key's hash (its home), a random read in a big slab: all
// the nodes of a probe run are asked for (prefetch) before the first is read.
//
// The price is CPU while the table is that full: the purge's node reads
// and the longer probe runs of a table kept up to 3/4 full by its live
// entries, where the doubled one was half full. A cancel and an add cost
// the wheel 1.5 times as much (BenchmarkChurnFull, 2^23 entries). So a
// smaller table, whose doubling costs at most 32 MiB, still doubles.
//
// Between two insertions the table is a valid one: look-ups, insertions
// and deletions work on it as ever, and a position lookup returns is used
// before the next reserve. A move (the live entries above 3/4, or the
// tombstones past 13/16 all the same) ends a purge where it is.

// purgeMinEntries is the smallest table a purge clears (2^23 entries, 32
// MiB: from about 3M live timers); a test lowers it to purge small tables.
var purgeMinEntries uint64 = 1 << 23

// mayPurge reports whether the table sheds its tombstones by a purge
// rather than a move: it has purgeMinEntries or more, and with one more
// entry, its live entries are above 3/8 of it (a move would double it)
// and within 3/4.
func (x *index) mayPurge() bool {
	size, live := x.mask+1, uint64(x.count)+1
	return size >= purgeMinEntries && live*8 > size*3 && live*4 <= size*3
}

// fitsPurging reports whether the table has room for one more entry
// within 13/16, the limit while a purge runs.
func (x *index) fitsPurging() bool {
	return uint64(x.count+x.tombs+1)*16 <= (x.mask+1)*13
}

// aheadLoad is what reserve compares with aheadAt to map the next table
// ahead: the live entries where tombstones are purged (the next move is
// the one the live entries make past 3/4), else live entries and
// tombstones.
func (x *index) aheadLoad() uint64 {
	if uint64(x.count)*8 > (x.mask+1)*3 && x.mask+1 >= purgeMinEntries {
		return uint64(x.count)
	}
	return uint64(x.count + x.tombs)
}

// startPurge starts a pass over the table, where the last one stopped. A
// table mapped ahead of a move at this size (one that would have shed
// the tombstones) is freed, and the next mapped when the live entries near
// 3/4.
func (x *index) startPurge() {
	size := x.mask + 1
	if x.next != nil && x.nextLen == size {
		x.takeAhead(0)
		x.setAheadAt()
	}
	x.purgeAt &= x.mask
	x.purgeLeft, x.purgeStep = size, size
	if used := uint64(x.count + x.tombs); used+2 < size*13/16 {
		room := size*13/16 - used - 1
		x.purgeStep = max(purgeMinStep, (size+room/2-1)/(room/2))
	}
}

// unmapAhead frees the table mapped ahead of a doubling, and lets the next
// one be mapped, once the live entries of a table that purges its
// tombstones have fallen 1/128 short of 3/4 (aheadOf twice): there only
// the live entries bring the doubling on, and they may never come back,
// while the table, backed with memory ahead (1 GiB at 100M timers), would
// stay for as long as this one does.
func (x *index) unmapAhead() {
	size := x.mask + 1
	if size < purgeMinEntries || x.nextLen != 2*size || uint64(x.count)+2*aheadOf(size) >= size*3/4 {
		return
	}
	x.takeAhead(0)
	x.setAheadAt()
}

// purgeMinStep is the fewest positions a purge looks at an insertion.
const purgeMinStep = 16

// purge goes on with the pass for k positions at least (to the end of the
// probe run where they end), or to its end.
func (x *index) purge(k uint64) {
	for k > 0 && x.purgeLeft > 0 {
		n := x.purgeRuns(x.purgeAt, min(k, x.purgeLeft))
		x.purgeAt = (x.purgeAt + n) & x.mask
		k -= min(k, n)
		x.purgeLeft -= min(x.purgeLeft, n)
	}
}

// purgeRuns clears the tombstones of the k positions from a on and of the
// probe run the last of them is in, and returns how many positions it
// looked at: up to the empty entry that ends that run, included.
func (x *index) purgeRuns(a, k uint64) uint64 {
	first := noPos // the first tombstone of the probe run, if any
	for n := uint64(0); ; {
		p := (a + n) & x.mask
		c, base := x.table.c[p>>chunkShift], p&^chunkMask
		for j := p - base; j < uint64(len(c)); j, n = j+1, n+1 {
			switch c[j] {
			case tomb:
				if first == noPos {
					first = base + j
				}
			case 0:
				if first != noPos {
					x.sweep(first, base+j) // (it writes no entry from here on)
					first = noPos
				}
				if n+1 >= k {
					return n + 1
				}
			}
		}
	}
}

// sweep empties the entries from p, a tombstone, up to end, the empty entry
// that ends p's probe run, and puts the live ones among them back, in
// their order (see "Tombstones cleared in place").
func (x *index) sweep(p, end uint64) {
	t, im := &x.table, x.table.imask
	buf := x.purgeBuf[:0]
	for ; p != end; p = (p + 1) & x.mask {
		e := t.at(p)
		if *e == tomb {
			x.tombs--
		} else {
			buf = append(buf, *e)
			prefetch(unsafe.Pointer(x.nodes.get(*e & im)))
		}
		*e = 0
	}
	for _, e := range buf {
		n := x.nodes.get(e & im)
		q := hash(Key{n.receiver, n.tid}) & x.mask
		for ; *t.at(q) > tomb; q = (q + 1) & x.mask {
		}
		if *t.at(q) == tomb {
			x.tombs--
		}
		*t.at(q) = e
	}
	x.purgeBuf = buf[:0]
}
