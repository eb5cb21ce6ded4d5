package wheel

import (
	"slices"

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
// announced (see blockSource.reserve).
func newPrefaulter(s *slab, count uint64) *Prefaulter {
	blocks := (uint64(s.nsent) + count + blockLen - 1) / blockLen
	regions, first := s.src.reserve(int(blocks))
	return &Prefaulter{regions: slices.Clone(regions), first: uint64(first) * blockLen}
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
