package session

import "github.com/tickwheel/tickwheel/protocol"

// pushBacklog appends frame, r's newest event (numbered r.seq), to r's
// backlog. Past a bound it first drops r's oldest events: while r holds
// max_backlog events or its bytes would pass max_backlog_bytes, and while
// all backlogs together (outboxes are bounded apart) hold
// max_backlog_total events or their bytes would pass
// max_backlog_bytes_total. When r holds no event to
// drop and a bound is still reached (the other receivers fill the total,
// or the event alone is over max_backlog_bytes), the new event is dropped
// instead. Every drop is counted and reported (see drop).
//
// Not for a receiver in acknowledged mode, whose outbox drops nothing
// (see fireAcked).
func (c *Core) pushBacklog(r *receiver, frame []byte) {
	l := &c.limits
	size := len(frame)
	for r.n > 0 && (r.n >= l.MaxBacklog || r.bytes+size > l.MaxBacklogBytes) {
		c.drop(r, r.seq-uint64(r.n)) // the oldest: the backlog holds r.seq-n .. r.seq-1
		c.popBacklog(r)
	}
	overTotal := func() bool {
		events, bytes := c.backlogEvents-c.outboxEvents, c.backlogBytes-c.outboxBytes
		return events >= uint64(l.MaxBacklogTotal) || bytes+uint64(size) > uint64(l.MaxBacklogBytesTotal)
	}
	for r.n > 0 && overTotal() {
		c.drop(r, r.seq-uint64(r.n))
		c.popBacklog(r)
	}
	if size > l.MaxBacklogBytes || overTotal() {
		c.drop(r, r.seq)
		return
	}
	c.appendBacklog(r, frame)
}

// appendBacklog adds frame at the end of r's backlog, growing the ring.
func (c *Core) appendBacklog(r *receiver, frame []byte) {
	if r.n == len(r.backlog) { // grow the ring, oldest first
		// (At least one more slot: a restored backlog may hold more than
		// max_backlog, had the limit been lowered since it filled.)
		limit := c.limits.MaxBacklog
		if r.acked {
			limit = c.limits.MaxOutbox
		}
		grown := c.rings.get(max(min(limit, max(2*len(r.backlog), minRing)), r.n+1))
		for i := range r.n {
			grown[i] = r.at(i)
		}
		clear(r.backlog)
		c.rings.put(r.backlog)
		r.backlog, r.head = grown, 0
	}
	r.backlog[r.slot(r.n)] = frame
	r.n++
	r.bytes += len(frame)
	c.backlogEvents++
	c.backlogBytes += uint64(len(frame))
	if r.acked {
		c.outboxEvents++
		c.outboxBytes += uint64(len(frame))
	}
}

// drop counts event seq of r dropped from (or before) its backlog. While r
// is bound its session is sent a dropped notice at once (in this turn's
// output, ahead of r's later events); while it is unbound the next bind's
// reply reports the count.
func (c *Core) drop(r *receiver, seq uint64) {
	c.droppedTotal++
	if seq <= r.high { // sent once in acknowledged mode, which has ended
		c.lostTotal++
	}
	if r.owner == nil {
		r.dropped++
		return
	}
	c.noteDropped(r.owner, r.id, seq)
}

// noteDropped tells s that event seq of receiver was dropped: it extends
// the dropped notice at the end of s's output when that one ends just
// before seq for the same receiver, else appends a new notice. (A burst
// into a full backlog drops its events one by one, oldest first: they
// make one notice, not one each.)
func (c *Core) noteDropped(s *Session, receiver, seq uint64) {
	if s.noteEnd > 0 && s.noteEnd == len(s.out) && s.noteRecv == receiver && s.noteLast+1 == seq {
		s.out = s.out[:s.noteStart]
	} else {
		s.noteStart, s.noteRecv, s.noteFirst = len(s.out), receiver, seq
	}
	s.noteLast = seq
	s.out = protocol.AppendDropped(s.out, receiver, s.noteFirst, seq)
	s.noteEnd = len(s.out)
	c.markDirty(s)
}

// popBacklog removes and returns r's oldest backlog event.
func (c *Core) popBacklog(r *receiver) []byte {
	frame := r.backlog[r.head]
	r.backlog[r.head] = nil
	r.head = r.slot(1)
	r.n--
	r.bytes -= len(frame)
	c.backlogEvents--
	c.backlogBytes -= uint64(len(frame))
	if r.acked {
		c.outboxEvents--
		c.outboxBytes -= uint64(len(frame))
	}
	if r.n == 0 { // an emptied backlog keeps no memory
		c.rings.put(r.backlog)
		r.backlog, r.head, r.chunk = nil, 0, nil
	}
	return frame
}

// backlogFrames returns r's backlog, oldest first (for snapshots).
func (r *receiver) backlogFrames() [][]byte {
	out := make([][]byte, r.n)
	for i := range r.n {
		out[i] = r.at(i)
	}
	return out
}

// Frames of a receiver's backlog are carved out of chunks the receiver
// owns, not allocated one by one: a chunk starts at minChunk bytes and
// doubles, up to maxChunk, while the receiver's events keep coming, and the
// next starts small again once the backlog has emptied. A chunk is freed
// when the last of its frames leaves the backlog, so what a receiver holds
// beyond its frames' bytes is at most about two chunks.
const (
	minChunk = 256
	maxChunk = 64 << 10
)

// newFrame returns a copy of frame, for r's backlog, in r's current chunk.
func (r *receiver) newFrame(frame []byte) []byte {
	n := len(frame)
	if cap(r.chunk)-len(r.chunk) < n {
		size := minChunk
		if r.chunk != nil {
			size = min(2*cap(r.chunk), maxChunk)
		}
		r.chunk = make([]byte, 0, max(size, n))
	}
	at := len(r.chunk)
	r.chunk = append(r.chunk, frame...)
	return r.chunk[at : at+n : at+n]
}

// ringPool keeps emptied backlog rings for reuse, by size (powers of two
// from minRing to maxPooledRing, at most ringsPerSize of each): a receiver
// whose outbox empties at every ack and fills again does not allocate and
// grow a ring each time. What it holds is memory only, never state.
type ringPool struct {
	free [ringSizes][][][]byte
}

const (
	minRing       = 8
	maxPooledRing = 1024
	ringSizes     = 8 // 8, 16, ..., 1024
	ringsPerSize  = 256
)

// ringSize returns the pool index of a ring of n slots, or -1.
func ringSize(n int) int {
	for i, size := 0, minRing; size <= maxPooledRing; i, size = i+1, size*2 {
		if n == size {
			return i
		}
	}
	return -1
}

// get returns an empty ring of at least n slots (a power of two up to
// maxPooledRing, exactly n past it).
func (p *ringPool) get(n int) [][]byte {
	if n > maxPooledRing {
		return make([][]byte, n)
	}
	size := minRing
	for size < n {
		size *= 2
	}
	i := ringSize(size)
	if k := len(p.free[i]); k > 0 {
		ring := p.free[i][k-1]
		p.free[i] = p.free[i][:k-1]
		return ring
	}
	return make([][]byte, size)
}

// put gives back a ring whose slots are all nil.
func (p *ringPool) put(ring [][]byte) {
	if i := ringSize(len(ring)); i >= 0 && len(p.free[i]) < ringsPerSize {
		p.free[i] = append(p.free[i], ring)
	}
}
