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
type frameQueue struct {
	chunks [][]byte // the frames: chunks[0][off:], then the other chunks whole
	off    int      // where the first frame starts in chunks[0]
	// cur and curOff locate the frame at the cursor (or the end of the
	// frames): chunk index and offset.
	cur, curOff int
}

// Chunk sizes of a frameQueue.
const (
	minChunk = 256
	maxChunk = 64 << 10
)

// frameLen returns the length of the frame that starts b.
func frameLen(b []byte) int { return 4 + int(binary.BigEndian.Uint32(b)) }

// push appends a copy of frame.
func (q *frameQueue) push(frame []byte) {
	n := len(frame)
	k := len(q.chunks) - 1
	if k < 0 || cap(q.chunks[k])-len(q.chunks[k]) < n {
		size := minChunk
		if k >= 0 {
			size = min(2*cap(q.chunks[k]), maxChunk)
		}
		q.chunks = append(q.chunks, make([]byte, 0, max(size, n)))
		k++
	}
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

// frames returns the frames, oldest first (sharing their bytes).
func (q *frameQueue) frames(n int) [][]byte {
	out := make([][]byte, 0, n)
	for i, c := range q.chunks {
		if i == 0 {
			c = c[q.off:]
		}
		for len(c) > 0 {
			l := frameLen(c)
			out = append(out, c[:l:l])
			c = c[l:]
		}
	}
	return out
}
