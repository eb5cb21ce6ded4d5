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

const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
	// maxNodes bounds the slab at 2^28 nodes (about 15 GiB of timers), so the
	// chunk table is a fixed array of 64Ki pointers and at() needs no bounds check.
	maxChunks = 1 << 16
	maxNodes  = maxChunks * chunkSize
)

// chunk is a fixed block of nodes. Growing the slab appends a chunk and never
// copies existing nodes, so a wheel of millions of timers grows without pauses
// and without slack beyond one chunk.
type chunk struct {
	nodes [chunkSize]node
}

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
// freeSet). Indices below nsent are the sentinels of the wheel's lists and
// are never handed out.
type slab struct {
	chunks [maxChunks]*chunk // inline: one load less per node access
	n      uint32            // indices handed out so far (high-water mark)
	free   freeSet
	nsent  uint32
}

func (s *slab) init(nsent uint32) {
	s.nsent = nsent
	s.n = nsent
	for i := uint32(0); i < nsent; i++ {
		s.grow(i)
		n := s.at(i)
		n.wnext, n.wprev = i, i
	}
}

func (s *slab) grow(i uint32) {
	if s.chunks[i>>chunkShift&(maxChunks-1)] == nil {
		s.chunks[i>>chunkShift&(maxChunks-1)] = new(chunk)
		s.free.grow((i>>chunkShift + 1) << chunkShift)
	}
}

// at returns the node at index i.
func (s *slab) at(i uint32) *node {
	return &s.chunks[i>>chunkShift&(maxChunks-1)].nodes[i&chunkMask]
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

// copyTo copies the nodes handed out so far (sentinels and free ones
// included) into dst, reused when it is large enough, and returns it.
func (s *slab) copyTo(dst []node) []node {
	n := int(s.n)
	if cap(dst) < n {
		dst = make([]node, n, n+n/8)
	}
	dst = dst[:n]
	for c := 0; c<<chunkShift < n; c++ {
		k := min(n-c<<chunkShift, chunkSize)
		copyMem(unsafe.Pointer(&dst[c<<chunkShift]), unsafe.Pointer(&s.chunks[c].nodes[0]), uintptr(k)*unsafe.Sizeof(node{}))
	}
	return dst
}
