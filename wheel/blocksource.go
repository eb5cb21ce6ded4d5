package wheel

import (
	"unsafe"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// The slab's blocks of nodes, past the first heapBlocks, come from regions
// mapped outside the Go heap (bigmem), regionBlocks blocks each, where the
// kernel may back them with huge pages: a big wheel's nodes are read at
// random, and in 4 KiB pages nearly every read was a TLB miss whose page
// walk missed the cache too (see package bigmem). A region of 128 blocks
// of 112 KiB is 14 MiB, exactly 7 huge pages, so none is left part used
// but the last region's.
//
// The first blocks stay in the Go heap, as do index tables under
// mapMinEntries (index.go): below a few million timers the page tables of
// the arrays fit in the caches, so a TLB miss costs little, while a huge
// page costs its first write: in a virtual machine that hands free memory
// back to its host (this one does), a fresh 2 MiB page was zeroed at about
// 0.4 GB/s, and the 142 MiB of huge pages of a run of 2M pipelined adds
// cost it 5% more CPU than 4 KiB pages (docs/BENCHMARKS.md, "The wheel's big
// arrays outside the Go heap"). Variables, for the tests.
var (
	heapBlocks           = 1024    // 2,097,152 nodes, 112 MiB
	mapMinEntries uint64 = 1 << 23 // 32 MiB of table, from about 3.1M timers
)

const (
	regionBlocks = 128
	blockBytes   = blockLen * unsafe.Sizeof(node{})
	regionBytes  = regionBlocks * blockBytes
)

// A region is a whole number of huge pages (else the compiler refuses
// this: an array of negative length).
var _ [0]struct{} = [regionBytes % bigmem.HugePage]struct{}{}

// blockSource hands out the slab's blocks. Owned with the slab.
type blockSource struct {
	made   int           // blocks handed out
	region *bigmem.Mem   // the region being carved, nil before the first
	next   int           // the region's next block
	ahead  []*bigmem.Mem // regions mapped ahead (reserve), for the next ones
	mapped int64         // bytes of the regions mapped for this slab
}

// reserve maps ahead the regions that blocks in all will take, so that a
// restore knows where its nodes will be before it writes them (see
// Prefaulter); it returns them, and the index of the first block of the
// first. Nothing is resident until written. On a 32-bit system it
// reserves nothing: a count from a damaged header could take the address
// space.
func (s *blockSource) reserve(blocks int) (ahead []*bigmem.Mem, first int) {
	if unsafe.Sizeof(uintptr(0)) < 8 {
		return nil, 0
	}
	from := max(s.made, heapBlocks)
	if s.region != nil {
		from += regionBlocks - s.next
	}
	for b := from + regionBlocks*len(s.ahead); b < blocks; b += regionBlocks {
		m := bigmem.Map(regionBytes)
		if m == nil {
			break
		}
		s.ahead = append(s.ahead, m)
		s.mapped += int64(regionBytes)
	}
	return s.ahead, from
}

// block returns a zeroed block of nodes, and the memory that must be kept
// reachable for as long as it is read (nil: the block is in the Go heap).
func (s *blockSource) block() (*[blockPages]cowPage[node], *bigmem.Mem) {
	s.made++
	if s.made > heapBlocks && (s.region == nil || s.next == regionBlocks) {
		if len(s.ahead) > 0 {
			s.region, s.ahead = s.ahead[0], s.ahead[1:]
		} else if s.region = bigmem.Map(regionBytes); s.region != nil {
			s.mapped += int64(regionBytes)
		}
		s.next = 0
	}
	if s.region == nil { // a small slab, or no mapping outside the heap here
		return new([blockPages]cowPage[node]), nil
	}
	b := s.region.Bytes()[uintptr(s.next)*blockBytes:][:blockBytes]
	s.next++
	return (*[blockPages]cowPage[node])(unsafe.Pointer(unsafe.SliceData(b))), s.region
}

// MappedBytes returns the bytes of w's memory mapped outside the Go heap:
// its regions of nodes and its index tables (the process's total is
// MappedBytes). The rest of the total is wheels dropped and not collected
// yet, Frozens of them not released, or restores under way.
func (w *Wheel) MappedBytes() int64 {
	n := w.nodes.src.mapped
	for _, m := range [...]*bigmem.Mem{w.index.table.mem, w.index.old.mem, w.index.next} {
		if m != nil {
			n += int64(len(m.Bytes()))
		}
	}
	return n
}

// MappedBytes returns the bytes the process's wheels hold outside the Go
// heap: their nodes past the first few thousand, and their big index tables
// (see package bigmem). The runtime's memory statistics and its soft memory
// limit do not count them; RSS does, once written.
func MappedBytes() int64 { return bigmem.Mapped() }
