package wheel

import (
	"unsafe"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// Filling a big restored index region by region.
//
// An IndexBuilder whose table is mapped outside the heap (mapMinEntries or
// more) does not insert a timer's entry at its random place as it reads
// the node: at 100M timers the table (512 MiB) and its ext (128 MiB) are
// far past the caches, and each insertion was two cache misses and a TLB
// miss, the builder's 11 s of CPU of a 13-18 s restart, where the
// prefetches waited 5.6 s. Instead Add appends the entry, with the bits of
// its place within its region of the table and its ext, to the bucket of
// that region (a radix partition: one sequential write to one of a few
// hundred streams), and once the last record is read, fill inserts each
// region's bucket in turn, its region (2 MiB of table and 512 KiB of ext)
// in the last-level cache while it does: most insertions are cache hits.
// A bucket holds half its region's share (newPartition): about half way
// through the records each one fills and is inserted into its region
// there and then (flush), and the fill after the last record inserts the
// other half, less what the builder inserted ahead while it waited for
// the decoding (Tidy). Memory: 4 bytes a timer while the index is built (a mapping
// in small pages the kernel backs as the buckets fill), unmapped by finish.
//
// The index is the same as one filled timer by timer for every look-up:
// the same entries (tag and node), each in the probe run of its hash, no
// tombstone; only the order of the entries within a probe run may differ.
// Two timers with one key are found as Add found them: the second inserted
// meets the first in its probe run, whatever the order.
//
// A caller with a second core fills the regions in parts on both
// (IndexBuilder.Parts): a part never writes or reads past its last
// region, so two parts share nothing; an entry whose probe run would go
// past it is left to finish, which inserts those (a few a part) once the
// parts are filled.

// partShift is the log2 of the entries of a region: 2^19, 2 MiB of table
// and 512 KiB of ext, which the last-level cache holds (this machine's
// cores have 512 KiB of L2 and share 32 MiB of L3; regions of 2^17 and
// 2^18 entries, within L2, restored 100M timers no faster: docs/BENCHMARKS.md,
// "A 100M restart in about 8 s"). A variable for the tests, which
// make regions small to have many of them in a small table. At most 24 (a
// bucket entry keeps the position within its region in 24 bits).
var partShift uint = 19

// partSlack is how many entries a bucket holds past its region's expected
// share and 1/32 of it (a variable for the tests, which set it to 0 so
// that buckets fill and are flushed).
var partSlack uint64 = 256

// partition is an IndexBuilder's buckets: bucket r holds the entries to
// insert in region r (positions r<<shift up to (r+1)<<shift), each a
// uint64: the table entry (tag and node index) in its low 32 bits, the
// position within the region in the next 24, and the ext in the top 8.
type partition struct {
	shift uint
	cap   uint64   // entries a bucket holds
	n     []uint64 // entries in each bucket
	buf   []uint64 // bucket r: buf[r*cap:][:n[r]]
	mem   *bigmem.Mem
	flat  []uint32 // the table, whole (it is one mapping)
	ext   []uint8  // the ext, whole
	// parts is what Parts returned, nil before: Add then inserts at once.
	parts []*IndexPart
	tidy  uint64 // the bucket Tidy looks at first
}

// IndexPart is a part of the regions of an IndexBuilder's table, filled
// by Fill: see IndexBuilder.Parts.
type IndexPart struct {
	b      *IndexBuilder
	lo, hi uint64   // its regions
	spill  []uint64 // entries whose probe run leaves the part, region<<32 | its bucket index
	reads  uint32   // nodes read to compare keys
	filled bool
	dup    bool
}

// newPartition returns the buckets of a builder of count timers whose
// table of size entries is mapped (t, ext), or nil when the buckets cannot
// be mapped (the builder then inserts each entry as it reads it). A bucket
// holds half the expected share of its region, 1/32 of the share more and
// partSlack entries; one that fills is inserted there and then (flush):
// once for each region with uniform hashes, more often for a region the
// keys crowd, which costs time, not a wrong index. Buckets of the whole share (8 bytes a timer)
// had a 100M restart clear 0.8 GB of fresh pages for them, 3-4% of its CPU
// on this machine's VM, for a fill that then inserted everything after the
// last record (docs/BENCHMARKS.md, "Half-share buckets").
func newPartition(size uint64, count uint32, t []uint32, ext []uint8) *partition {
	shift := min(partShift, 24)
	regions := size >> shift
	if regions < 2 {
		return nil
	}
	share := uint64(count)/regions + 1
	bcap := share/2 + share/32 + partSlack
	// In small pages: the buckets are hundreds of streams written from
	// their starts, and a count from a damaged header (the CRC is checked
	// at the snapshot's end) sizes them for timers that are not there. In
	// huge pages each bucket's first entry backed 2 MiB: a restore of 2.5M
	// timers with one bit flipped in the count peaked at 742 MB of RSS,
	// the good file's at 225 MB.
	mem := bigmem.MapSmallPages(uintptr(regions * bcap * 8))
	if mem == nil {
		return nil
	}
	return &partition{
		shift: shift,
		cap:   bcap,
		n:     make([]uint64, regions),
		buf:   unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem.Bytes()))), regions*bcap),
		mem:   mem,
		flat:  t,
		ext:   ext,
	}
}

// addParted puts the entry of node i, whose key hashes to h, in its
// region's bucket, first inserting the bucket's entries when it is full.
// It reports false when that met two timers with one key.
func (b *IndexBuilder) addParted(blocks []*cowBlock[node], i uint32, h uint64) bool {
	pt := b.pt
	p := h & b.mask
	r := p >> pt.shift
	if pt.n[r] == pt.cap && !b.flush(blocks, r) {
		return false
	}
	pt.buf[r*pt.cap+pt.n[r]] = uint64(tag(h, b.table.imask)|i) | (p&(1<<pt.shift-1))<<32 | uint64(extBits(h))<<56
	pt.n[r]++
	return true
}

// flush inserts the entries of bucket r (full, or see Tidy) and empties it.
func (b *IndexBuilder) flush(blocks []*cowBlock[node], r uint64) bool {
	if !b.insertBucket(blocks, r, noPos, &b.reads, nil) {
		b.dup = true
		return false
	}
	b.pt.n[r] = 0
	return true
}

// Tidy inserts the entries of one bucket of a partitioned builder into its
// region now, for a caller with nothing else to do meanwhile (no mark
// waiting: the decoding has not got further), so that the fill after the
// last record has that many fewer to insert: at 100M timers the index
// builder waited 1.4-2 s for marks while the decoding, the long pole,
// went on, and the fill after it took ~1 s on both cores. The buckets are
// taken in turn, one at least a quarter full (a smaller batch would
// insert into a region not in the cache for few entries). It reports
// false, having done nothing, when no bucket is, or the builder is not
// partitioned, or its parts are made, or it met two timers with one key
// (Restorer.Wheel reports them).
func (b *IndexBuilder) Tidy() bool {
	pt := b.pt
	if pt == nil || pt.parts != nil || b.dup {
		return false
	}
	regions := uint64(len(pt.n))
	for range regions {
		r := pt.tidy
		pt.tidy = (r + 1) % regions
		if pt.n[r] >= max(pt.cap/4, 1) {
			b.flush(b.blocks, r)
			return true
		}
	}
	return false
}

// insertBucket inserts the entries of bucket r into its region, in the
// bucket's order, prefetching their places some ahead, each probing up to
// position limit (noPos: around the table); an entry whose probe run
// reaches limit first is not inserted but passed to spilled (its index in
// the bucket). It reports false when it met two timers with one key.
func (b *IndexBuilder) insertBucket(blocks []*cowBlock[node], r, limit uint64, reads *uint32, spilled func(j int)) bool {
	pt := b.pt
	const ahead = 16
	base := r << pt.shift
	bucket := pt.buf[r*pt.cap:][:pt.n[r]]
	for j := range min(len(bucket), ahead) {
		prefetch(unsafe.Pointer(&pt.flat[base|bucket[j]>>32&(1<<24-1)]))
	}
	for j, e := range bucket {
		if j%8 == 0 && j+256 < len(bucket) { // the bucket, a line each 8 entries
			prefetch(unsafe.Pointer(&bucket[j+256]))
		}
		if j+ahead < len(bucket) {
			q := base | bucket[j+ahead]>>32&(1<<24-1)
			prefetch(unsafe.Pointer(&pt.flat[q]))
			prefetch(unsafe.Pointer(&pt.ext[q]))
		}
		ok, spill := b.insertParted(blocks, base|e>>32&(1<<24-1), e, limit, reads)
		if !ok {
			return false
		}
		if spill {
			spilled(j)
		}
	}
	return true
}

// insertParted inserts bucket entry e whose home is position p, probing
// up to position limit (excluded; noPos: around the table). It reports
// false when the run holds a node with the same key, and spilled when
// the run reaches limit first (nothing is written then).
func (b *IndexBuilder) insertParted(blocks []*cowBlock[node], p, e, limit uint64, reads *uint32) (ok, spilled bool) {
	pt, im := b.pt, b.table.imask
	v, x := uint32(e), uint8(e>>56)
	for {
		f := pt.flat[p]
		if f == 0 {
			break
		}
		if (f^v)&^im == 0 && pt.ext[p] == x {
			*reads++
			n, m := frozenGet(blocks, v&im), frozenGet(blocks, f&im)
			if m.receiver == n.receiver && m.tid == n.tid {
				return false, false
			}
		}
		if p++; p == limit {
			return true, true
		}
		p &= b.mask
	}
	pt.flat[p], pt.ext[p] = v, x
	return true, false
}

// Parts divides the regions of the table into n parts (n >= 1) for the
// caller to fill, once the builder's last Add has returned and before
// Restorer.Wheel: each part's Fill may run on a goroutine of its own, at
// the same time as the others' (see IndexPart.Fill). It returns nil when
// the builder inserts each entry as it reads it (a table in the heap),
// and nil after the first call. A timer Add is given after Parts is
// inserted at once; Restorer.Wheel fills the parts not filled.
func (b *IndexBuilder) Parts(n int) []*IndexPart {
	pt := b.pt
	if pt == nil || pt.parts != nil || b.dup {
		return nil
	}
	regions := uint64(len(pt.n))
	n = int(min(max(uint64(n), 1), regions))
	pt.parts = make([]*IndexPart, n)
	for k := range pt.parts {
		pt.parts[k] = &IndexPart{b: b, lo: regions * uint64(k) / uint64(n), hi: regions * uint64(k+1) / uint64(n)}
	}
	return pt.parts
}

// Fill inserts the entries of the part's regions, each region's in turn
// (their order within a region: slab order), prefetching the entries'
// places some ahead. It reads the nodes the builder indexed (their keys)
// and writes the table and ext of its regions only: the parts of one
// builder may be filled at the same time on different goroutines, each
// part on one. An entry whose probe run reaches the part's end is kept
// for Restorer.Wheel. Filling a part twice does nothing.
func (p *IndexPart) Fill() {
	if p.filled {
		return
	}
	p.filled = true
	b := p.b
	limit := p.hi << b.pt.shift
	for r := p.lo; r < p.hi; r++ {
		spilled := func(j int) { p.spill = append(p.spill, r<<32|uint64(j)) }
		if !b.insertBucket(b.blocks, r, limit, &p.reads, spilled) {
			p.dup = true
			return
		}
	}
}

// fillParts ends a partitioned build (finish): it fills the parts not
// filled (all the regions in one part when Parts was not called), then
// inserts the entries the parts left, around the table. It reports false
// when two timers have the same key; it unmaps the buckets either way.
func (b *IndexBuilder) fillParts() bool {
	pt := b.pt
	defer func() {
		pt.mem.Free()
		b.pt = nil
	}()
	if pt.parts == nil {
		b.Parts(1)
	}
	for _, p := range pt.parts {
		p.Fill()
		b.reads += p.reads
		if p.dup {
			return false
		}
	}
	for _, p := range pt.parts {
		for _, s := range p.spill {
			r := s >> 32
			e := pt.buf[r*pt.cap+uint64(uint32(s))]
			if ok, _ := b.insertParted(b.blocks, r<<pt.shift|e>>32&(1<<24-1), e, noPos, &b.reads); !ok {
				return false
			}
		}
	}
	return true
}
