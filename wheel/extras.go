package wheel

import "math/bits"

// extra holds what most timers do not need, so that they do not pay for it:
// the data payload, the interval, and the high bits of a firing count past
// 2^32. A node has one iff its flagExtra bit is set; its every field then
// holds the extra's index in extras.items, and the interval is extra.every.
// A free extra holds the index of the next free one in every (a free list
// threaded through the slab, so freeing a million costs no extra memory).
type extra struct {
	data    []byte
	every   uint64
	firedHi uint32
}

// Payload buffers are recycled by power-of-two size class, up to 64 KiB,
// with at most poolDepth buffers kept per class.
const (
	minClassShift = 4  // 16 bytes
	maxClassShift = 16 // 64 KiB
	poolDepth     = 1024
)

type extras struct {
	items []extra // a slab: indices are stable while in use
	free  uint32  // first free index in items + 1; 0: none
	pool  [maxClassShift - minClassShift + 1][][]byte
	// While holding (during Advance), buffers released are kept in hold
	// until the firing's callback returns (release), so the Data of a Fire
	// stays intact for the whole callback even if it adds timers.
	hold    [][]byte
	holding bool
}

// at returns extra j for reading or update.
func (e *extras) at(j uint32) *extra { return &e.items[j] }

// alloc stores x and returns its index.
func (e *extras) alloc(x extra) uint32 {
	if e.free != 0 {
		j := e.free - 1
		e.free = uint32(e.items[j].every)
		e.items[j] = x
		return j
	}
	e.items = append(e.items, x)
	return uint32(len(e.items) - 1)
}

// drop frees extra j and recycles its payload buffer.
func (e *extras) drop(j uint32) {
	x := &e.items[j]
	if x.data != nil {
		e.recycle(x.data)
	}
	*x = extra{every: uint64(e.free)}
	e.free = j + 1
}

// copyData returns a pooled buffer holding a copy of p.
func (e *extras) copyData(p []byte) []byte {
	c := sizeClass(len(p))
	if c < 0 {
		return append([]byte(nil), p...)
	}
	var b []byte
	if l := len(e.pool[c]); l > 0 {
		b = e.pool[c][l-1]
		e.pool[c][l-1] = nil
		e.pool[c] = e.pool[c][:l-1]
	} else {
		b = make([]byte, 0, 1<<(c+minClassShift))
	}
	return append(b[:0], p...)
}

func (e *extras) recycle(b []byte) {
	if e.holding {
		e.hold = append(e.hold, b)
		return
	}
	c := sizeClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minClassShift) || len(e.pool[c]) >= poolDepth {
		return
	}
	e.pool[c] = append(e.pool[c], b)
}

// endHold stops holding at the end of an Advance.
func (e *extras) endHold() {
	e.holding = false
	e.release()
}

// release recycles the buffers held during a firing's callback.
func (e *extras) release() {
	if len(e.hold) == 0 {
		return
	}
	holding := e.holding
	e.holding = false
	for j, b := range e.hold {
		e.recycle(b)
		e.hold[j] = nil
	}
	e.hold = e.hold[:0]
	e.holding = holding
}

// sizeClass returns the pool class of an n-byte payload, or -1 if it is not pooled.
func sizeClass(n int) int {
	if n > 1<<maxClassShift {
		return -1
	}
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}
