package session

import "github.com/tickwheel/tickwheel/protocol"

// pushBacklog appends frame, r's newest event (numbered r.seq), to r's
// backlog. Past a bound it first drops r's oldest events: while r holds
// max_backlog events or its bytes would pass max_backlog_bytes, and while
// all backlogs together (outboxes are bounded apart) hold
// max_backlog_total events or the bytes they hold would pass
// max_backlog_bytes_total. The total counts the bytes really held: the
// capacity of the chunks the events lie in (frameQueue), with the chunk
// the new event would need; a chunk is freed with its last event, so
// past the total r's oldest events are dropped up to a chunk's worth at
// once (64 KiB at most). When r holds no event to drop and a bound is
// still reached (the other receivers fill the total, or the event alone
// is over max_backlog_bytes), the new event is dropped instead. Every
// drop is counted and reported (see drop).
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
		events, held := c.backlogEvents-c.outboxEvents, c.backlogHeld-c.outboxHeld
		return events >= uint64(l.MaxBacklogTotal) || held+uint64(r.q.grow(size)) > uint64(l.MaxBacklogBytesTotal)
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

// appendBacklog adds a copy of frame at the end of r's backlog.
func (c *Core) appendBacklog(r *receiver, frame []byte) {
	held := r.q.held
	r.q.push(frame)
	c.heldChanged(r, held)
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

// holdsAfter reports whether output held by HoldTurn for a later turn
// begins after out[at]: a frame there must not grow past that place.
func (s *Session) holdsAfter(at int) bool {
	n := len(s.marks)
	return n > 0 && s.marks[n-1].from > s.written+uint64(at)
}

// noteDropped tells s that event seq of receiver was dropped: it extends
// the dropped notice at the end of s's output when that one ends just
// before seq for the same receiver, else appends a new notice. (A burst
// into a full backlog drops its events one by one, oldest first: they
// make one notice, not one each.)
//
// The notice is listed in s.inflight like an event, with the seqs it
// announces: if s closes before its bytes reach the kernel, they are
// added to the receiver's dropped count for its next bind (loseUnsent).
// An extended notice is the last entry (nothing follows it in s.out).
func (c *Core) noteDropped(s *Session, receiver, seq uint64) {
	extend := s.noteEnd > 0 && s.noteEnd == len(s.out) && s.noteRecv == receiver && s.noteLast+1 == seq &&
		!s.holdsAfter(s.noteStart)
	if extend {
		s.out = s.out[:s.noteStart]
	} else {
		s.noteStart, s.noteRecv, s.noteFirst = len(s.out), receiver, seq
	}
	s.noteLast = seq
	s.out = protocol.AppendDropped(s.out, receiver, s.noteFirst, seq)
	s.noteEnd = len(s.out)
	e := inflight{receiver: receiver, end: s.written + uint64(len(s.out)), dropped: seq - s.noteFirst + 1,
		size: uint64(s.noteEnd - s.noteStart)}
	c.inflightBytes += e.size
	if n := len(s.inflight); extend && n > 0 && s.inflight[n-1].dropped > 0 && s.inflight[n-1].receiver == receiver {
		c.inflightBytes -= s.inflight[n-1].size
		s.inflight[n-1] = e
	} else {
		s.inflight = append(s.inflight, e)
	}
	c.markDirty(s)
}

// popBacklog removes and returns r's oldest backlog event (its bytes stay
// valid: see frameQueue).
func (c *Core) popBacklog(r *receiver) []byte {
	held := r.q.held
	frame := r.q.pop()
	c.heldChanged(r, held)
	r.n--
	r.bytes -= len(frame)
	c.backlogEvents--
	c.backlogBytes -= uint64(len(frame))
	if r.acked {
		c.outboxEvents--
		c.outboxBytes -= uint64(len(frame))
	}
	return frame
}

// heldChanged counts the change of r's chunks' capacity, which was held
// bytes, in the backlogs' (and outboxes') totals.
func (c *Core) heldChanged(r *receiver, held int) {
	d := uint64(r.q.held) - uint64(held) // (wraps for a decrease: the sums stay right)
	c.backlogHeld += d
	if r.acked {
		c.outboxHeld += d
	}
}

// backlogFrames returns r's backlog, oldest first (for snapshots).
func (r *receiver) backlogFrames() [][]byte { return r.q.frames(r.n) }
