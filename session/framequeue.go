package session

import "encoding/binary"

// frameQueue holds a receiver's queued events (a backlog, or an outbox) as
// whole frames, back to back in chunks of bytes: no pointer or allocation
// per event, and nothing for the garbage collector to scan but the chunks.
// Frames are read in order only — popped from the front, or, in
// acknowledged mode, read at a cursor that walks the frames not yet sent —
// so their length prefixes are the only index needed.
//
// A chunk starts at minChunk bytes and doubles, up to maxChunk, while
// frames keep coming; a frame larger than that gets a chunk of its own. A
// chunk is dropped once its last frame is popped, and an emptied queue
// keeps no memory. Bytes once written are never written again, so the
// frames handed out (popped, read, or listed for a snapshot) stay valid.
//
// held is the chunks' capacity, the bytes the queue really holds, which
// the backlogs' total budget counts. The chunks' layout is a function of
// the pushes and pops, not of the frames held alone, so a snapshot keeps
// it (layout) and a restore rebuilds it (restore): a replay then counts
// the same bytes.
type frameQueue struct {
	chunks [][]byte // the frames: chunks[0][off:], then the other chunks whole
	off    int      // where the first frame starts in chunks[0]
	// cur and curOff locate the frame at the cursor (or the end of the
	// frames): chunk index and offset.
	cur, curOff int
	held        int
}

// Chunk sizes of a frameQueue.
const (
	minChunk = 256
	maxChunk = 64 << 10
)

// frameLen returns the length of the frame that starts b.
func frameLen(b []byte) int { return 4 + int(binary.BigEndian.Uint32(b)) }

// grow returns the bytes a push of an n-byte frame would allocate: 0
// when it fits in the last chunk, else the new chunk's capacity.
func (q *frameQueue) grow(n int) int {
	k := len(q.chunks) - 1
	if k >= 0 && cap(q.chunks[k])-len(q.chunks[k]) >= n {
		return 0
	}
	size := minChunk
	if k >= 0 {
		size = min(2*cap(q.chunks[k]), maxChunk)
	}
	return max(size, n)
}

// push appends a copy of frame.
func (q *frameQueue) push(frame []byte) {
	if g := q.grow(len(frame)); g > 0 {
		q.chunks = append(q.chunks, make([]byte, 0, g))
		q.held += g
	}
	k := len(q.chunks) - 1
	q.chunks[k] = append(q.chunks[k], frame...)
}

// pop removes the first frame and returns it. The queue must not be empty.
func (q *frameQueue) pop() []byte {
	c := q.chunks[0]
	atCursor := q.cur == 0 && q.curOff == q.off
	n := frameLen(c[q.off:])
	frame := c[q.off : q.off+n : q.off+n]
	q.off += n
	switch {
	case q.off < len(c):
	case len(q.chunks) == 1: // the last frame: an empty queue keeps no memory
		*q = frameQueue{}
		return frame
	default:
		q.held -= cap(c)
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.off = 0
		if q.cur > 0 {
			q.cur--
		} else {
			q.curOff = 0
		}
	}
	if atCursor { // (nothing was sent: the cursor stays at the front)
		q.cur, q.curOff = 0, q.off
	}
	return frame
}

// next returns the frame at the cursor and moves the cursor past it. The
// cursor must not be at the end.
func (q *frameQueue) next() []byte {
	if q.curOff == len(q.chunks[q.cur]) { // the end of a chunk, and more after it
		q.cur, q.curOff = q.cur+1, 0
	}
	c := q.chunks[q.cur]
	n := frameLen(c[q.curOff:])
	frame := c[q.curOff : q.curOff+n : q.curOff+n]
	q.curOff += n
	return frame
}

// rewind moves the cursor back to the first frame.
func (q *frameQueue) rewind() { q.cur, q.curOff = 0, q.off }

// frames returns the frames, oldest first (sharing their bytes); n is a
// hint of how many there are.
func (q *frameQueue) frames(n int) [][]byte {
	out := make([][]byte, 0, n)
	eachFrame(q.chunks, q.off, func(f []byte) { out = append(out, f) })
	return out
}

// restore fills an empty queue with frames laid out in chunks of caps,
// the first frame at off in the first chunk, as push placed them (a frame
// goes in the next chunk when the last has no room for it). It reports
// false, and leaves the queue empty, when the frames do not fit that
// layout (the caller then pushes them).
func (q *frameQueue) restore(caps []int, off int, frames [][]byte) bool {
	if len(frames) == 0 || len(caps) == 0 || off < 0 || off > caps[0] {
		return len(frames) == 0 && len(caps) == 0
	}
	chunks := make([][]byte, 1, len(caps))
	chunks[0] = make([]byte, off, caps[0]) // the popped frames' room
	for _, f := range frames {
		k := len(chunks) - 1
		if cap(chunks[k])-len(chunks[k]) < len(f) {
			if k+1 == len(caps) || caps[k+1] < len(f) {
				return false
			}
			chunks = append(chunks, make([]byte, 0, caps[k+1]))
			k++
		}
		chunks[k] = append(chunks[k], f...)
	}
	if len(chunks) != len(caps) || len(chunks[0]) == off {
		return false
	}
	held := 0
	for _, c := range caps {
		held += c
	}
	*q = frameQueue{chunks: chunks, off: off, curOff: off, held: held}
	return true
}
