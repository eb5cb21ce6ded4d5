package wheel

import "math/bits"

// extra holds what most timers do not need, so that they do not pay for it:
// the data payload, an interval of 2^32 ticks or more, and the high bits of a
// firing count past 2^32. A node has an entry iff its flagExtra bit is set.
type extra struct {
	data    []byte
	every   uint64 // the interval when node.every is 0
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
	m    map[uint32]extra
	pool [maxClassShift - minClassShift + 1][][]byte
	// hold keeps buffers released during Advance until it returns, so the
	// Data of a Fire stays intact for the whole callback.
	hold    [][]byte
	holding bool
}

func (e *extras) get(i uint32) extra { return e.m[i] }

func (e *extras) set(i uint32, x extra) {
	if e.m == nil {
		e.m = make(map[uint32]extra)
	}
	e.m[i] = x
}

// drop removes i's entry and recycles its payload buffer.
func (e *extras) drop(i uint32) {
	x, ok := e.m[i]
	if !ok {
		return
	}
	delete(e.m, i)
	if x.data != nil {
		e.recycle(x.data)
	}
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

// endHold recycles the buffers held during an Advance.
func (e *extras) endHold() {
	e.holding = false
	for j, b := range e.hold {
		e.recycle(b)
		e.hold[j] = nil
	}
	e.hold = e.hold[:0]
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
