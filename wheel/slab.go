package wheel

// nilIdx marks the end of a receiver list and the end of the free list.
const nilIdx = ^uint32(0)

// Marks kept in node.wprev for nodes that sit in no wheel list.
const (
	markFree   = ^uint32(0)     // the node is on the free list
	markPaused = ^uint32(0) - 1 // the node is a paused timer; due holds its remaining ticks
)

// node is one timer, or a list head (sentinel) for the indices below slab.nsent.
// It holds no pointers, so the GC never scans the slab. 56 bytes.
type node struct {
	receiver, tid uint64
	// due is the absolute tick of the next firing; for a paused timer, the
	// ticks that were left when it was paused.
	due uint64
	// every is the interval, or 0 when it does not fit in 32 bits and lives in
	// the extras table (flagBig).
	every  uint32
	seq    uint32 // add sequence number: same-tick firing order
	fired  uint32 // low 32 bits of the firing count (high bits in extras)
	repeat uint32
	// wnext, wprev link the node into a slot, pending or overflow list
	// (circular, through a sentinel). For a free node wnext is the next free
	// node and wprev is markFree; for a paused node wprev is markPaused.
	wnext, wprev uint32
	// rnext, rprev link the node into its receiver's circular list.
	rnext, rprev uint32
}

const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

// chunk is a fixed block of nodes. Growing the slab appends a chunk and never
// copies existing nodes, so a wheel of millions of timers grows without pauses
// and without slack beyond one chunk.
type chunk struct {
	nodes [chunkSize]node
	flags [chunkSize / 64]uint64 // flagExtra: the node has an entry in extras
}

// slab stores nodes by uint32 index with a free list. Indices below nsent are
// the sentinels of the wheel's lists and are never handed out.
type slab struct {
	chunks []*chunk
	n      uint32 // indices handed out so far (high-water mark)
	free   uint32 // head of the free list, nilIdx when empty
	nsent  uint32
}

func (s *slab) init(nsent uint32) {
	s.nsent = nsent
	s.free = nilIdx
	s.n = nsent
	for i := uint32(0); i < nsent; i++ {
		s.grow(i)
		n := s.at(i)
		n.wnext, n.wprev = i, i
	}
}

func (s *slab) grow(i uint32) {
	for int(i>>chunkShift) >= len(s.chunks) {
		s.chunks = append(s.chunks, new(chunk))
	}
}

// at returns the node at index i.
func (s *slab) at(i uint32) *node {
	return &s.chunks[i>>chunkShift].nodes[i&chunkMask]
}

// alloc returns the index of a zeroed node, or false when the index space is exhausted.
func (s *slab) alloc() (uint32, bool) {
	if i := s.free; i != nilIdx {
		n := s.at(i)
		s.free = n.wnext
		*n = node{}
		return i, true
	}
	if s.n >= nilIdx-1 {
		return 0, false
	}
	i := s.n
	s.grow(i)
	s.n++
	return i, true
}

// release puts node i on the free list.
func (s *slab) release(i uint32) {
	n := s.at(i)
	*n = node{wnext: s.free, wprev: markFree}
	s.free = i
	s.setExtra(i, false)
}

func (s *slab) hasExtra(i uint32) bool {
	return s.chunks[i>>chunkShift].flags[(i&chunkMask)>>6]&(1<<(i&63)) != 0
}

func (s *slab) setExtra(i uint32, on bool) {
	f := &s.chunks[i>>chunkShift].flags[(i&chunkMask)>>6]
	if on {
		*f |= 1 << (i & 63)
	} else {
		*f &^= 1 << (i & 63)
	}
}
