package wheel

import "unsafe"

// nilIdx marks the end of a receiver list.
const nilIdx = ^uint32(0)

// Marks kept in node.wprev for nodes that sit in no wheel list.
const (
	markFree   = ^uint32(0)     // the node is free
	markPaused = ^uint32(0) - 1 // the node is a paused timer; due holds its remaining ticks
	markFiring = ^uint32(0) - 2 // the node is being fired and sits in no list
)

// node is one timer, or a list head (sentinel) for the indices below slab.nsent.
// It holds no pointers, so the GC never scans the slab. 56 bytes.
type node struct {
	receiver, tid uint64
	// due is the absolute tick of the next firing; for a paused timer, the
	// ticks that were left when it was paused.
	due uint64
	// every is the interval, or, when flagExtra is set, the index of the
	// node's extra, which holds the interval with the rarer fields.
	every  uint32
	seq    uint32 // add sequence number (same-tick firing order), and flagExtra
	fired  uint32 // low 32 bits of the firing count (high bits in extras)
	repeat uint32
	// wnext, wprev link the node into a slot, the overflow list or the due
	// list (circular, through a sentinel). Otherwise wprev is a mark:
	// markFree, markPaused or markFiring.
	wnext, wprev uint32
	// rnext, rprev link the node into its receiver's list, newest first
	// (nilIdx at either end).
	rnext, rprev uint32
}

// maxNodes bounds the slab at 2^28 nodes (about 15 GiB of timers): node
// indices fit in the index's 28 bits.
const maxNodes = 1 << 28

// The top bit of node.seq says the node has an entry in the extras table; the
// other 31 bits are the add sequence number.
const (
	flagExtra = 1 << 31
	seqMask   = flagExtra - 1
)

func (n *node) hasExtra() bool { return n.seq&flagExtra != 0 }

// order returns the node's add sequence number.
func (n *node) order() uint32 { return n.seq & seqMask }

// slab stores nodes by uint32 index, reusing freed ones lowest first (see
// freeSet). Indices below nsent are the sentinels of the wheel's lists (and
// unused ones up to a page boundary) and are never handed out. The nodes
// live in a cowArray: at, before its first write to a node since a Freeze,
// has the snapshots being encoded save the node if they have not reached
// its page (the write barrier, barrier.go); get reads without it.
type slab struct {
	arr cowArray[node]
	// flat is each block's nodes (its all, read as blockLen nodes in
	// order), appended by grow: get's one load to find a block's nodes,
	// where through arr.blocks it is two dependent ones (the block, then
	// its all, on a line of its own in each 2 KiB block).
	flat []*[blockLen]node
	// blocks is &flat[0], kept by grow: get's load of a block without
	// flat's length (a bounds check is three of a node access's ~9
	// instructions, and a firing makes about 15). Every index get is
	// given is below n, so its block is in flat.
	blocks unsafe.Pointer
	src    blockSource // where the blocks' nodes come from
	n      uint32      // indices handed out so far (high-water mark)
	free   freeSet
	nsent  uint32
	bars   []*barrier // the barriers of the Frozens not done walking (owned by the loop)
	// spareClaims are the claim sets of barriers dropped, for the next,
	// and at first one made for the first barrier; grown with the slab.
	spareClaims []*claimSet
}

// init makes sentinels of the first nsent indices, rounded up to a whole
// page so that no page holds both sentinels and timers: freeze leaves the
// sentinels' pages out of the copy on write.
func (s *slab) init(nsent uint32) {
	nsent = (nsent + pageLen - 1) &^ (pageLen - 1)
	s.nsent = nsent
	s.n = nsent
	s.spareClaims = []*claimSet{{}} // grown with the slab, for the first Freeze (claimsFor)
	for i := uint32(0); i < nsent; i++ {
		s.grow(i)
		n := s.at(i)
		n.wnext, n.wprev = i, i
	}
}

func (s *slab) grow(i uint32) {
	for i >= s.arr.len() {
		s.arr.grow(s.src.block())
		s.flat = append(s.flat, (*[blockLen]node)(unsafe.Pointer(s.arr.blocks[len(s.arr.blocks)-1].all)))
		s.blocks = unsafe.Pointer(unsafe.SliceData(s.flat))
		s.free.grow(s.arr.len())
		s.growClaims()
	}
}

// at returns the node at index i, to read or write. The pointer is valid
// until the next Freeze.
//
// With no barrier in the list (no Frozen's encoder is walking the slab, or
// its barrier was pruned once over), every write goes in place, so at is
// get: a page's epoch matters only to a barrier (a page older than the
// epoch goes through it), and every page but the sentinels' is older than
// the next Freeze's epoch whatever at does now. While a barrier is in the
// list, at takes stale, out of line: the page's epoch, and the barrier
// for a stale page (own). It is inlined into its callers (go build
// -gcflags=-m=2 ./wheel shows it; an add calls it about 8 times, which as
// a call, with the epoch check, cost 192 of a pipelined add's ~5,000
// instructions).
func (s *slab) at(i uint32) *node { return s.atOr(i, (*slab).stale) }

// atOr is at with its slow path passed in: the inliner charges a call of
// a parameter 17 where a call of a function costs 57, which would put at
// over its budget of 80; inlined into at, the call's target is known. The
// slow path returns the node itself, so that nothing of the fast path is
// kept (spilled) across the call.
func (s *slab) atOr(i uint32, slow func(s *slab, i uint32) *node) *node {
	if len(s.bars) != 0 {
		return slow(s, i)
	}
	return s.get(i)
}

// stale is at while the list of barriers is not empty: it first drops
// those that are over (so that at is get again once the last snapshot's
// walk ends), then checks node i's page: of the current epoch (adopted,
// nothing more to save for any barrier), the node; older, own's barrier
// and adoption, then the node. The slab's pages are never copied (own
// adopts them in place), so the node is where get finds it.
//
//go:noinline
func (s *slab) stale(i uint32) *node {
	s.pruneBars()
	bi, pi, j := locate(i)
	if s.arr.blocks[bi].epochs[pi] != s.arr.epoch {
		s.own(bi, pi, j)
	}
	return s.get(i)
}

// own returns page pi of block bi, stale, for a write to its
// node j: after the write barrier (serialize) saved the node for the
// Frozens that need it, the page as it is, adopted into the current epoch
// once none needs anything more of it (until then every write asks
// again). A node page is never copied while pinned: the caller may hold
// pointers into it from earlier in the same operation.
func (s *slab) own(bi, pi, j uint32) *cowPage[node] {
	a := &s.arr
	if len(s.bars) == 0 || a.pins == nil || a.pins.Load() == 0 {
		return a.own(bi, pi, true)
	}
	pg := a.blocks[bi].page(pi)
	if s.serialize(bi<<blockShift|pi, j, pg) {
		return a.own(bi, pi, true)
	}
	return pg
}

// get returns the node at index i, only to read (see cowArray.get), or to
// write a sentinel (an index below nsent): the sentinels' pages are left
// out of the copy on write, so at would find them current and return the
// same pointer after a check. The firing path reads, and writes the
// sentinels, through get wherever it may: at's check of the barriers is
// a load and a branch on every access, and its slow call has the caller
// keep a frame.
//
// The node is found through its block's one allocation (all, which every
// slab block has: grow makes them together), read as the blockLen nodes it
// is, in order (blockPages pages of pageLen nodes side by side: one
// multiply, not one per level), found in flat. Inlinable, as at is.
//
// The address is computed without indexing the array through its pointer:
// &flat[b][j] has the compiler check the pointer for nil by reading the
// block's first byte, a load of a line (and a page) other than the node's
// on every node access, and a real one where only the address is wanted
// (the index's move prefetches nodes by it). flat's entries are never nil
// and j is below blockLen, so the address is inside the block's nodes.
// Nor is flat's length checked (blocks): i must be below n, as every index
// the wheel keeps is; one that is not reads past flat.
func (s *slab) get(i uint32) *node {
	b := *(*unsafe.Pointer)(unsafe.Add(s.blocks, uintptr(i/blockLen)*unsafe.Sizeof(s.blocks)))
	return (*node)(unsafe.Add(b, uintptr(i%blockLen)*unsafe.Sizeof(node{})))
}

// walkAhead is how many nodes past the one it reads a walk of a list
// prefetches (prefetchAfter): about 1.8 KiB.
const walkAhead = 32

// spanStep is the nodes (448 bytes) of the 512 prefetchAfter prefetches.
const spanStep = 8

// prefetchAfter prefetches the 512 bytes from node i+walkAhead, when that
// node exists. A walk of a list calls it at each node i that is a multiple
// of spanStep: a list in the order of its nodes in memory (a burst of
// timers added in order, allocated side by side) then has its next nodes
// on their way before each link is followed, where the walk otherwise
// waits for each node in turn. For a list in another order the prefetches
// are wasted loads. It is for a pass that only reads (inRounds, before a
// burst fires in rounds): its nodes are read again when they fire, past
// the cache in a big burst, so the pass is a second trip through memory.
func (s *slab) prefetchAfter(i uint32) {
	if i+walkAhead < s.n {
		prefetchSpan(unsafe.Pointer(s.get(i + walkAhead)))
	}
}

// alloc returns the index of an unused node, whose fields the caller must
// all set, or false when the slab is full.
func (s *slab) alloc() (uint32, bool) {
	if i, ok := s.free.take(); ok {
		return i, true
	}
	if s.n >= maxNodes {
		return 0, false
	}
	i := s.n
	s.grow(i)
	s.n++
	return i, true
}

// release frees node i.
func (s *slab) release(i uint32) {
	s.at(i).wprev = markFree
	s.free.add(i)
}
