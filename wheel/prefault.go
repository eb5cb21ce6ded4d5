package wheel

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// Prefaulter backs with RAM, ahead of a Restorer, the memory its wheel's
// nodes will take, so that the Restorer's goroutine does not stop at each
// new page for the kernel to clear it: 17% of a 100M restore's CPU was
// that clearing, on the goroutine that decodes, the slower of the two a
// restore with two cores runs (docs/BENCHMARKS.md). It populates the
// regions mapped for the nodes (blocksource.go) a region at a time, from
// a goroutine of the caller's, up to prefaultAhead nodes past the last
// mark it was given: a header that claims more timers than the records
// that follow costs no more than that.
//
// Ownership: Restorer.Prefaulter returns it after the header; the caller
// calls Upto on one goroutine at a time, with marks Restorer.Ready
// returned, concurrently with Restorer.Write and IndexBuilder.Add. It
// neither reads nor writes the nodes: the kernel backs their pages and
// leaves their contents as they are, on whatever page the Restorer
// writes meanwhile.
type Prefaulter struct {
	regions []*bigmem.Mem
	first   uint64 // the index of regions[0]'s first node
	done    int    // regions populated, or all of them once one failed

	// The table and ext of a partitioned index (restorepart.go), nil
	// otherwise, populated by Index; count is the timers the header
	// announced and base the slab index of the first, tableBytes the
	// table's size, indexDone its bytes populated (and a quarter as many
	// of ext's), all of them once one failed.
	table, ext  *bigmem.Mem
	count, base uint64
	tableBytes  uintptr
	indexDone   uintptr
}

// prefaultAhead is how far past a mark Upto populates: two regions of
// nodes (28 MiB), a few marks' worth at the Restorer's pace.
const prefaultAhead = 2 * regionBlocks * blockLen

// Prefaulter returns the restore's Prefaulter, or nil when there is
// nothing to populate (no header yet, a wheel that fits in the heap's
// blocks, an error, or no mapping outside the heap here).
func (r *Restorer) Prefaulter() *Prefaulter {
	if r.err != nil || r.pf == nil || len(r.pf.regions) == 0 {
		return nil
	}
	return r.pf
}

// newPrefaulter maps ahead the regions of the count timers the header
// announced (see blockSource.reserve); ib is the restore's index builder.
func newPrefaulter(s *slab, count uint64, ib *IndexBuilder) *Prefaulter {
	blocks := (uint64(s.nsent) + count + blockLen - 1) / blockLen
	regions, first := s.src.reserve(int(blocks))
	p := &Prefaulter{regions: slices.Clone(regions), first: uint64(first) * blockLen, count: count, base: uint64(s.nsent)}
	if ib.pt != nil {
		p.table, p.ext, p.tableBytes = ib.table.mem, ib.extMem, uintptr(len(ib.pt.flat))*4
	}
	return p
}

// indexStep is how many bytes of the index's table one Index call
// populates (and a quarter as many of its ext): a huge page, 2 MiB, a
// ms or two: a mark that comes meanwhile waits no longer than that.
var indexStep uintptr = 2 << 20 // a variable for the tests

// Index populates the next indexStep bytes of a partitioned index's table
// (and the ext beside them), as far as the share of the header's count
// that mark's timers are, and reports whether it did: false when it has
// nothing to do (yet), or the index is not partitioned. It is for the
// time a goroutine calling Upto has between two marks: the table (512 MiB
// at 100M timers) and its ext (128 MiB) are first written by
// IndexPart.Fill, once the last record is read, where the kernel's
// clearing of their pages was a quarter of the fill's CPU (perf). A header
// that claims more timers than the records that follow costs no more than
// their share. Call it on the goroutine that calls Upto, never after
// Restorer.Wheel (the ext is unmapped then).
func (p *Prefaulter) Index(mark RestoreMark) bool {
	if p.table == nil || p.count == 0 {
		return false
	}
	size := p.tableBytes
	have := min(uint64(mark.n)-min(uint64(mark.n), p.base), p.count)
	upto := uintptr(uint64(size) * have / p.count)
	if have < p.count {
		upto &^= indexStep - 1
	}
	if p.indexDone >= upto {
		return false
	}
	n := min(indexStep, upto-p.indexDone)
	if !p.table.Populate(p.indexDone, n) || !p.ext.Populate(p.indexDone/4, (n+3)/4) {
		p.indexDone = size
		return false
	}
	p.indexDone += n
	return true
}

// Back populates at once, on workers goroutines (this one among them), the
// memory limit timers take (a trusted bound of the timers the snapshot
// holds: see session.Config's RestoreTimers), at most the header's count:
// the regions of their nodes, then their share of a partitioned index's
// table and its ext, in indexStep pieces. It returns when all is backed,
// or a region or step could not be (a kernel before Linux 5.14: Upto and
// Index then do nothing more either). It is what Upto and Index do at the
// decoding's pace, done first: a crashed server's memory is free at once,
// and the kernel of a virtual machine may hand free pages back to its
// host within seconds, after which a page costs several times more to
// clear (docs/BENCHMARKS.md, "Recovery at 100M on a slower host"). Call
// it before any Upto or Index.
func (p *Prefaulter) Back(limit uint64, workers int) {
	n := min(limit, p.count)
	regions := p.done
	for regions < len(p.regions) && p.first+uint64(regions)*regionBlocks*blockLen < p.base+n {
		regions++
	}
	var upto uintptr
	if p.table != nil && p.count > 0 {
		upto = uintptr(uint64(p.tableBytes) * n / p.count)
	}
	steps := int((upto - min(upto, p.indexDone) + indexStep - 1) / indexStep)
	tasks := regions - p.done + steps
	var next atomic.Int64
	var failed atomic.Bool
	work := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= tasks || failed.Load() {
				return
			}
			var ok bool
			if k < regions-p.done {
				ok = p.regions[p.done+k].Populate(0, regionBytes)
			} else {
				off := p.indexDone + uintptr(k-(regions-p.done))*indexStep
				m := min(indexStep, upto-off)
				ok = p.table.Populate(off, m) && p.ext.Populate(off/4, (m+3)/4)
			}
			if !ok {
				failed.Store(true)
			}
		}
	}
	var wg sync.WaitGroup
	for range max(workers, 1) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if failed.Load() {
		p.done, p.indexDone = len(p.regions), p.tableBytes
		return
	}
	p.done, p.indexDone = regions, max(p.indexDone, upto)
}

// Upto populates the regions that begin before prefaultAhead nodes past
// mark, that it did not populate yet. After a region the kernel could not
// populate (a kernel before Linux 5.14), it does nothing more.
func (p *Prefaulter) Upto(mark RestoreMark) {
	end := uint64(mark.n) + prefaultAhead
	for p.done < len(p.regions) && p.first+uint64(p.done)*regionBlocks*blockLen < end {
		if !p.regions[p.done].Populate(0, regionBytes) {
			p.done = len(p.regions)
			return
		}
		p.done++
	}
}
