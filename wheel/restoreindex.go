package wheel

import (
	"unsafe"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// IndexBuilder builds the key index of a wheel being restored, and links
// the receivers' lists, a part at a time, so that a caller with a second
// core can do both on another goroutine while the Restorer goes on
// decoding: building the index of 10M timers cost about as much as
// decoding them (its table, 64 MiB then, is written at random, a cache
// miss per timer), and the lists are what balances the two (about 70 ns
// a timer each at 10M, BenchmarkRestore/index=aside).
//
// It reads only the keys and seqs of the nodes the Restorer finished
// (those a RestoreMark covers), through the slab's block list as the mark
// saw it, and writes its own table, which the Restorer hands to the wheel
// in Wheel, and, for a snapshot of version 3 or later, the receivers'
// lists: the wheel's receiver table and the finished nodes' rnext and
// rprev (restorerecv.go). The Restorer meanwhile writes other nodes, and
// other fields of the finished ones (their wheel list links), never a
// key, a seq or a receiver link, and never reads the receiver table; it
// never moves a node (the slab grows by appending blocks, which leaves the
// blocks and the part of the block list a mark holds as they were). It
// takes no lock and starts no goroutine.
//
// Ownership: after Restorer.IndexBuilder returns it, the caller owns it: it
// may call Add on one goroutine at a time, each time with a mark
// Restorer.Ready returned (on the Restorer's goroutine, after a Write)
// before that Add (a channel send of the mark orders them), and must have
// the last Add return before it calls Restorer.Wheel, which indexes what
// is left and takes the table. The index is the same whatever the marks:
// the nodes are inserted in slab order, as one pass over them would. A
// table mapped outside the heap is filled a region at a time instead,
// after the last Add (restorepart.go, Parts): the same entries, each in
// its probe run, in an order within a run that may differ.
//
// The table's chunks are made as they are first written, so that a header
// claiming more timers than the records that follow costs no memory; or,
// for a table of mapMinEntries or more, mapped outside the Go heap at once
// (bigmem), which costs none either until written.
type IndexBuilder struct {
	table itable
	// ext holds 8 more bits of each entry's hash (extBits), beside the
	// entry's 4, in chunks as table's: an insertion reads the node of an
	// entry of its probe run whose 12 bits match, to compare the keys for
	// a duplicate, in 1 of 4096 instead of 1 of 16. That read was a cache
	// miss in the slab, the builder's largest cost: 36% of it at 10M
	// timers. Dropped by finish: 1 byte an entry while the index is built
	// (1.3-2.7 bytes a timer).
	ext    [][]uint8
	extMem *bigmem.Mem // where ext lies when the table is mapped outside the heap
	mask   uint64
	count  uint32 // the timers to index
	next   uint32 // the next node to index
	end    uint32 // the slab index after the last timer
	dup    bool   // two timers have the same key
	reads  uint32 // nodes read to compare keys (for the tests)
	// recv, when not nil, is the wheel's receiver table: the builder links
	// each timer it indexes into its receiver's list (restorerecv.go),
	// noting in unsorted the receivers whose list that leaves out of add
	// order.
	recv     *recvTable
	unsorted map[uint64]struct{}
	// heads is the lists of the receivers with an id (version 6), by id,
	// until takeHeads puts them in recv (recvid.go).
	heads []recvList
	// pt, when not nil, is where Add puts the entries of a table mapped
	// outside the heap, a bucket per region, until they are inserted a
	// region at a time (restorepart.go); blocks is the block list of the
	// latest mark.
	pt     *partition
	blocks []*cowBlock[node]
}

// RestoreMark is how far a Restorer has decoded: the nodes below n are
// finished, and blocks is the slab's block list that holds them.
type RestoreMark struct {
	n      uint32
	blocks []*cowBlock[node]
}

// newIndexBuilder returns the builder of the index of the count timers
// the header announced, to be at slab indices nsent.. of s.
// The table is the smallest that holds them within 3/4, as a wheel that
// grew to that many timers has (between 3/8 and 3/4 full): 4 bytes an
// entry, 5.3–10.7 bytes a timer.
func newIndexBuilder(s *slab, count uint32) *IndexBuilder {
	size := uint64(minIndexSize)
	for uint64(count)*4 > size*3 {
		size *= 2
	}
	t := itable{c: make([][]uint32, max(size>>chunkShift, 1)), imask: 1<<tagShiftFor(size, s.nsent) - 1} // see lazyAt
	ext := make([][]uint8, len(t.c))
	var extMem *bigmem.Mem
	if size >= mapMinEntries { // mapped outside the heap: untouched, it costs no memory either
		if t.mem = bigmem.Map(uintptr(size) * 4); t.mem != nil {
			if extMem = bigmem.Map(uintptr(size)); extMem == nil {
				t.mem.Free()
				t.mem = nil
			}
		}
		if t.mem != nil {
			t.c, ext = chunksOf[uint32](t.mem, size), chunksOf[uint8](extMem, size)
		}
	}
	var pt *partition
	if t.mem != nil {
		flat := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(t.mem.Bytes()))), size)
		pt = newPartition(size, count, flat, extMem.Bytes()[:size])
	}
	return &IndexBuilder{
		pt:     pt,
		table:  t,
		extMem: extMem,
		ext:    ext,
		mask:   size - 1,
		count:  count,
		next:   s.nsent,
		end:    s.nsent + count,
	}
}

// Add indexes the nodes mark covers (a value Restorer.Ready returned),
// from where the previous Add stopped (see IndexBuilder for who
// may call it when). It reports false when two of the timers indexed so far
// have the same key; it then indexes nothing more. (A partitioned builder
// mostly finds them when it fills its regions: Restorer.Wheel reports
// them either way.) A mark at or below the previous one does nothing.
//
// The nodes are read in slab order, and each one's table entry is
// prefetched some nodes ahead, so that the cache misses of a large table
// overlap.
func (b *IndexBuilder) Add(mark RestoreMark) bool {
	if b.dup {
		return false
	}
	end, blocks := min(mark.n, b.end), mark.blocks
	if b.next >= end {
		return true
	}
	b.blocks = blocks
	if b.pt != nil && b.pt.parts == nil {
		return b.addAllParted(blocks, end)
	}
	const ahead = 16
	var hs [ahead]uint64 // hashes of the nodes ahead, by index mod ahead
	keyHash := func(i uint32) uint64 {
		n := frozenGet(blocks, i)
		h := hash(Key{n.receiver, n.tid})
		prefetch(unsafe.Pointer(b.lazyAt(h & b.mask)))
		prefetch(unsafe.Pointer(&b.ext[(h&b.mask)>>chunkShift][h&b.mask&chunkMask]))
		return h
	}
	start := b.next
	for i := start; i < end && i < start+ahead; i++ {
		hs[i%ahead] = keyHash(i)
	}
	for i := start; i < end; i++ {
		h := hs[i%ahead]
		if j := i + ahead; j < end {
			hs[j%ahead] = keyHash(j)
		}
		if !b.insert(blocks, i, h) {
			b.dup = true
			return false
		}
		if b.recv != nil {
			b.linkRecv(blocks, i)
		}
	}
	b.next = end
	return true
}

// addAllParted is Add for a partitioned builder (restorepart.go): each
// node's entry goes to its region's bucket, up to node end.
func (b *IndexBuilder) addAllParted(blocks []*cowBlock[node], end uint32) bool {
	for i := b.next; i < end; i++ {
		n := frozenGet(blocks, i)
		if !b.addParted(blocks, i, hash(Key{n.receiver, n.tid})) {
			return false
		}
		if b.recv != nil {
			b.linkRecv(blocks, i)
		}
	}
	b.next = end
	return true
}

// insert puts node i, whose key hashes to h, in the first empty entry of
// its probe run, or reports false when the run holds a node with its key.
func (b *IndexBuilder) insert(blocks []*cowBlock[node], i uint32, h uint64) bool {
	im := b.table.imask
	n, t, x := frozenGet(blocks, i), tag(h, im), extBits(h)
	p := h & b.mask
	for e := *b.lazyAt(p); e != 0; e = *b.lazyAt(p) {
		if e^t <= im && b.ext[p>>chunkShift][p&chunkMask] == x {
			b.reads++
			if m := frozenGet(blocks, e&im); m.receiver == n.receiver && m.tid == n.tid {
				return false
			}
		}
		p = (p + 1) & b.mask
	}
	*b.lazyAt(p) = t | i
	b.ext[p>>chunkShift][p&chunkMask] = x
	return true
}

// extBits returns the 8 bits of h that IndexBuilder.ext keeps: above any
// table position's (a table has at most 2^28 entries), and below the tag's
// in a table of 2^27 entries or more (tag: the tag of a smaller table is
// wider and takes some of them too, which costs the builder nothing but
// part of the filter it no longer needs).
func extBits(h uint64) uint8 { return uint8(h >> 52) }

// lazyAt returns entry p of the table, making its chunk first if it is
// not made yet (the chunks of a table are chunkLen entries, or one chunk of
// the whole table when smaller).
func (b *IndexBuilder) lazyAt(p uint64) *uint32 {
	c := &b.table.c[p>>chunkShift]
	if *c == nil {
		*c = make([]uint32, min(b.mask+1, chunkLen))
		b.ext[p>>chunkShift] = make([]uint8, len(*c))
	}
	return &(*c)[p&chunkMask]
}

// finish indexes the nodes mark covers not indexed yet, which must be
// every timer, and gives the table to x,
// which then holds every timer and no tombstone. It reports false, and
// leaves x alone, when two timers have the same key.
func (b *IndexBuilder) finish(mark RestoreMark, x *index) bool {
	if !b.Add(mark) {
		return false
	}
	if b.pt != nil && !b.fillParts() {
		b.dup = true
		return false
	}
	for i := range b.table.c { // chunks no key hashed into
		if b.table.c[i] == nil {
			b.table.c[i] = make([]uint32, min(b.mask+1, chunkLen))
		}
	}
	x.table.mem.Free()
	x.old.mem.Free()
	b.extMem.Free()
	x.table, x.mask = b.table, b.mask
	x.takeAhead(0) // (none: a restore's index was empty)
	x.setAheadAt()
	x.count, x.tombs, x.purgeAt, x.purgeLeft = b.count, 0, 0, 0
	x.old, x.oldMask, x.oldLive, x.cursor, x.end, x.step, x.fresh = itable{}, 0, 0, 0, 0, 0, nil
	b.table, b.ext, b.extMem, b.next = itable{}, nil, nil, b.end // a later Add does nothing
	return true
}
