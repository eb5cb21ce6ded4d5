package wheel

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
)

// extra holds what most timers do not need, so that they do not pay for it:
// the data payload, the interval, and the high bits of a firing count past
// 2^32. A node has one iff its flagExtra bit is set; its every field then
// holds the extra's index, and the interval is extra.every. Freed extras
// are reused lowest first, like nodes (see freeSet).
//
// It holds no pointers, so the garbage collector never scans the extras: a
// payload of up to inlineData bytes lives in the extra itself (no allocation
// per timer); a longer one in a buffer of extras.big, whose index the first
// 4 bytes of data hold. 32 bytes.
type extra struct {
	every   uint64
	firedHi uint32
	dlen    uint32 // payload length
	data    [inlineData]byte
}

const inlineData = 16

// Payload buffers of the big ones are recycled by power-of-two size class,
// up to 64 KiB, with at most poolDepth buffers kept per class.
const (
	minClassShift = 5  // 32 bytes: shorter payloads are inline
	maxClassShift = 16 // 64 KiB
	poolDepth     = 1024
)

// extras stores the extras by index in a cowArray, like the slab's nodes
// (growing never copies them; at copies a page before writing it while a
// Frozen may read it).
type extras struct {
	arr  cowArray[extra]
	n    uint32 // extras handed out so far (high-water mark)
	free freeSet

	big     [][]byte // payloads longer than inlineData, by index
	bigFree []uint32 // free indices of big
	pool    [maxClassShift - minClassShift + 1][][]byte

	// While holding (during Advance), extras dropped are kept in held until
	// the firing's callback returns (release), so the Data of a Fire stays
	// intact for the whole callback even if it adds timers.
	held    []uint32
	holding bool

	bytes uint64 // payload bytes of the live extras (held ones excluded)

	// pins counts the Frozen copies not yet released (see Freeze), which
	// may be reading the big buffers of the extras they copied: while
	// there are any, a freed buffer goes to the garbage collector instead of
	// the pool, so no new payload overwrites it. nil before the first Freeze.
	pins *atomic.Int32
}

// at returns extra j for reading or update (see cowArray.at). Its fast
// path, a page of the current epoch, is written out here for extra so that
// it is inlined: cowArray's generic at is a call of ~40 instructions, and a
// firing with data makes three or four (add, fire, drop, free). The slow
// path is passed in as slab.at's is (see slab.atOr), to stay within the
// inliner's budget.
func (e *extras) at(j uint32) *extra { return e.atOr(j, (*extras).stale) }

func (e *extras) atOr(j uint32, slow func(e *extras, j uint32) *extra) *extra {
	p := j >> pageShift // locate(j), written out: it costs the inliner more
	b, pi := e.arr.blocks[p>>blockShift], p&(blockPages-1)
	if b.epochs[pi] != e.arr.epoch {
		return slow(e, j)
	}
	return &b.refs[pi][j&(pageLen-1)]
}

// stale is at for a page of an older epoch: cowArray.at copies it first
// if a reader may read it.
//
//go:noinline
func (e *extras) stale(j uint32) *extra { return e.arr.at(j) }

// get returns extra j only to read (see cowArray.get), inlined as at is.
func (e *extras) get(j uint32) *extra {
	bi, pi, k := locate(j)
	return &e.arr.blocks[bi].refs[pi][k]
}

// alloc stores a new extra with interval every and a copy of data, and
// returns its index.
func (e *extras) alloc(every uint64, data []byte) uint32 {
	j, ok := e.free.take()
	if !ok {
		j = e.n
		if j == e.arr.len() {
			e.arr.grow(nil, nil)
			e.free.grow(e.arr.len())
		}
		e.n++
	}
	x := e.at(j)
	x.every, x.firedHi, x.dlen = every, 0, uint32(len(data))
	e.bytes += uint64(len(data))
	if len(data) <= inlineData {
		copy(x.data[:], data)
		return j
	}
	var b uint32
	if l := len(e.bigFree); l > 0 {
		b = e.bigFree[l-1]
		e.bigFree = e.bigFree[:l-1]
		e.big[b] = e.copyData(data)
	} else {
		b = uint32(len(e.big))
		e.big = append(e.big, e.copyData(data))
	}
	binary.LittleEndian.PutUint32(x.data[:4], b)
	return j
}

// payload returns x's data (nil when it has none). An inline payload
// aliases the extra: it is valid until the extra is freed.
func (e *extras) payload(x *extra) []byte { return payloadOf(x, e.big) }

// payloadOf returns x's data, its long payloads (past inlineData bytes)
// held in big.
func payloadOf(x *extra, big [][]byte) []byte {
	switch {
	case x.dlen == 0:
		return nil
	case x.dlen <= inlineData:
		return x.data[:x.dlen:x.dlen]
	default:
		return big[binary.LittleEndian.Uint32(x.data[:4])]
	}
}

// drop frees extra j, at once or, while holding, when the callback returns.
func (e *extras) drop(j uint32) {
	e.bytes -= uint64(e.at(j).dlen)
	if e.holding {
		e.held = append(e.held, j)
		return
	}
	e.freeNow(j)
}

func (e *extras) freeNow(j uint32) {
	x := e.at(j)
	if x.dlen > inlineData {
		b := binary.LittleEndian.Uint32(x.data[:4])
		e.recycle(e.big[b])
		e.big[b] = nil
		e.bigFree = append(e.bigFree, b)
	}
	x.dlen = 0
	e.free.add(j)
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
	if e.pins != nil && e.pins.Load() != 0 {
		return // a Frozen may be reading b
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

// release frees the extras dropped during a firing's callback.
func (e *extras) release() {
	for _, j := range e.held {
		e.freeNow(j)
	}
	e.held = e.held[:0]
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
