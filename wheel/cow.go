package wheel

import (
	"slices"
	"sync/atomic"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// cowArray is the storage of the slab's nodes and of the extras: items
// addressed by uint32 index, in pages of pageLen items, grouped in blocks
// of blockPages pages with each page's epoch. Growing appends a block (all its pages
// allocated at once; the slab's in one allocation, see grow) and never
// moves an item, so a wheel of millions of
// timers grows without copying them.
//
// # Copy on write, versioned per snapshot
//
// freeze hands a reader (a Frozen, on another goroutine) the blocks as
// they stand, and bumps the array's epoch. From then on, while pins is
// non-zero, the pages and blocks made in an earlier epoch belong to the
// readers: they are never written again. The owner writes only through
// at, which first copies the page (and the block holding its reference)
// into the current epoch when it is older; a page is copied at most once
// per snapshot, on its first write after freeze, so the loop pays for the
// pages it writes while a snapshot is being encoded, a page (16 nodes)
// at a time, instead of a copy of the whole wheel in one turn.
// Reads (get) never copy.
//
// Ownership: the owner goroutine calls every method; a reader holds the
// block list freeze returned and reads the pages through it, which the
// owner no longer writes. The handoff of that list happens before the
// reader starts (the goroutine that encodes is started, or the Frozen
// otherwise passed, after freeze returns), and pins (atomic) says when
// the last reader is done: the owner then writes pages in place again,
// whatever their epoch, and adopts them into the current one.
//
// The items must hold no pointers (the pages are copied by value and
// reused by readers on other goroutines).
type cowArray[T any] struct {
	blocks []*cowBlock[T]
	epoch  uint32
	// pins counts the readers not done yet: the Frozen copies not
	// released (shared with the wheel's freezeShared). nil before the first
	// freeze: nothing is shared.
	pins *atomic.Int32
}

// A page is 16 items: 16 nodes (896 bytes) or 16 extras (512 bytes), each
// exactly one of the Go allocator's size classes, and small, because a
// turn that writes to many random timers during a snapshot (a level-1 slot
// of 50k timers coming down the wheel) copies a page per timer: 45 MB for
// 50k at 896 bytes, against 200 MB at 4 KiB. A block holds 128 pages'
// epochs (512 bytes), and their pointers when they are not one allocation.
const (
	pageShift  = 4
	pageLen    = 1 << pageShift
	blockShift = 7 // pages per block
	blockPages = 1 << blockShift
	blockLen   = blockPages * pageLen
)

// cowPage is pageLen items.
type cowPage[T any] [pageLen]T

// cowBlock holds blockPages pages and each page's epoch: the one it was
// made in (copied, or allocated) or last adopted into (own). The block's
// own epoch is the one it was made in: a block of an older epoch may be in
// a reader's list, so own copies it (and its refs) before changing one of
// its pages' pointers (a page's epoch it changes in place: readers read
// only the pages).
//
// A block made whole by grow (the slab's) has its pages in all, side by
// side, and no refs: page p is &all[p], always, since its pages are never
// copied. Its pages' epochs are then its only per-page state: 4 bytes a
// page of 16 nodes, where a pointer and an epoch (16 bytes) a page had
// cost a big wheel about 1 byte a timer of heap, and as much again of the
// collector's room over it (0.85 GB at 100M timers). A block of pages
// allocated one by one (the extras', copied on write) holds them in refs.
type cowBlock[T any] struct {
	epochs [blockPages]uint32
	epoch  uint32
	refs   *[blockPages]*cowPage[T] // the pages when all is nil
	// all is the block's pages as one allocation, when grow made them
	// together (the slab's, never copied), so that a read finds a node
	// without loading a page pointer, a cache miss of its own in a big
	// wheel; nil otherwise.
	all *[blockPages]cowPage[T]
	// keep is the memory all lies in when that is outside the Go heap
	// (bigmem): held by every block in it, so that it is unmapped only once
	// no block is reachable, the Frozens' included. nil otherwise.
	keep *bigmem.Mem
}

// page returns page p of the block.
func (b *cowBlock[T]) page(p uint32) *cowPage[T] {
	if b.all != nil {
		return &b.all[p]
	}
	return b.refs[p]
}

// clone returns a copy of b in epoch e for the owner to change, with refs
// of its own (a reader holding b goes on reading b's).
func (b *cowBlock[T]) clone(e uint32) *cowBlock[T] {
	nb := new(cowBlock[T])
	*nb = *b
	nb.epoch = e
	if b.refs != nil {
		refs := *b.refs
		nb.refs = &refs
	}
	return nb
}

// len returns the number of items the array has room for.
func (a *cowArray[T]) len() uint32 { return uint32(len(a.blocks)) * blockLen }

// locate returns the block, the page in it and the item in that page of
// item i.
func locate(i uint32) (block, page, item uint32) {
	p := i >> pageShift
	return p >> blockShift, p & (blockPages - 1), i & (pageLen - 1)
}

// grow appends a block: room for blockPages*pageLen more items, zeroed.
// Given all (zeroed), the block's pages are all's, one allocation (for
// nodes: 112 KiB, made by the slab's blockSource, against a span record
// and a 128-byte tail per 9 pages of 896 bytes allocated one by one: about
// 2 bytes a timer), and keep is what keeps all's memory alive (see
// cowBlock.keep); it is for an array whose pages own never copies (the
// slab's: its write barrier saves nodes instead), since a page copied out
// of such a block would leave its old place in the block allocated for as
// long as any other page of the block lives. With all nil (the extras,
// whose pages are copied on write), each page is its own allocation, freed
// once no reader holds it.
func (a *cowArray[T]) grow(all *[blockPages]cowPage[T], keep *bigmem.Mem) {
	b := &cowBlock[T]{epoch: a.epoch, all: all, keep: keep}
	for p := range b.epochs {
		b.epochs[p] = a.epoch
	}
	if all == nil {
		b.refs = new([blockPages]*cowPage[T])
		for p := range b.refs {
			b.refs[p] = new(cowPage[T])
		}
	}
	a.blocks = append(a.blocks, b)
}

// get returns item i for reading only: writing through it would change
// what a reader sees. i must be below len.
func (a *cowArray[T]) get(i uint32) *T {
	b, p, j := locate(i)
	return &a.blocks[b].page(p)[j]
}

// at returns item i for reading and writing, copying its page first if a
// reader may read it. The pointer is valid until the next freeze. i must be
// below len.
func (a *cowArray[T]) at(i uint32) *T {
	bi, pi, j := locate(i)
	b := a.blocks[bi]
	if b.epochs[pi] != a.epoch {
		return &a.own(bi, pi, false)[j]
	}
	return &b.page(pi)[j]
}

// own makes page pi of block bi the owner's to write, and returns it:
// with no reader, or when inPlace says no reader will read the page again
// (the slab's write barrier encoded it: barrier.go), the page as it is,
// adopted into the current epoch; otherwise a copy of it (and of its
// block, when that is older too). A block made whole (all) is never
// copied: only inPlace may be asked of it.
func (a *cowArray[T]) own(bi, pi uint32, inPlace bool) *cowPage[T] {
	b := a.blocks[bi]
	if a.pins == nil || a.pins.Load() == 0 {
		b.epoch, b.epochs[pi] = a.epoch, a.epoch
		return b.page(pi)
	}
	if inPlace {
		// The block may be in a reader's list: only the page's epoch, which
		// no reader reads, changes.
		b.epochs[pi] = a.epoch
		return b.page(pi)
	}
	if b.all != nil {
		panic("wheel: a copy on write of a page of a block made whole")
	}
	if b.epoch != a.epoch {
		b = b.clone(a.epoch)
		a.blocks[bi] = b
	}
	np := new(cowPage[T])
	*np = *b.refs[pi]
	b.refs[pi], b.epochs[pi] = np, a.epoch
	return np
}

// freeze returns the blocks as they stand for a reader, which must count
// in pins before the owner's next write, and starts a new epoch: every
// page is copied before its next write while pins is non-zero. The first
// keep items (a multiple of pageLen) are left out of the copy: the owner
// goes on writing them in place, so the reader must not read them (the
// slab's list heads, written by almost every change). Its cost is a copy
// of the block list: 8 bytes per 2048 items.
func (a *cowArray[T]) freeze(keep uint32) []*cowBlock[T] {
	if keep%pageLen != 0 || keep > a.len() {
		panic("wheel: freeze keeps no whole pages")
	}
	a.epoch++
	out := slices.Clone(a.blocks)
	for bi := range (keep + blockLen - 1) / blockLen {
		own := a.blocks[bi]
		out[bi] = own.clone(own.epoch) // the reader's block: the same pages, its own refs
		own.epoch = a.epoch
		for p := range min(blockPages, keep/pageLen-bi*blockPages) {
			own.epochs[p] = a.epoch
		}
	}
	return out
}

// frozenGet returns item i of the blocks a freeze returned.
func frozenGet[T any](blocks []*cowBlock[T], i uint32) *T {
	b, p, j := locate(i)
	return &blocks[b].page(p)[j]
}
