package session

// pushBacklog appends frame to r's backlog. Past a bound it first drops r's
// oldest events: while r holds max_backlog events or its bytes would pass
// max_backlog_bytes, and while all backlogs together hold max_backlog_total
// events or their bytes would pass max_backlog_bytes_total. When r holds no
// event to drop and a total bound is still reached, the new event is
// dropped instead. Every drop is counted (see drop).
func (c *Core) pushBacklog(r *receiver, frame []byte) {
	l := &c.limits
	size := len(frame)
	for r.n > 0 && (r.n >= l.MaxBacklog || r.bytes+size > l.MaxBacklogBytes) {
		c.popBacklog(r)
		c.drop(r)
	}
	overTotal := func() bool {
		return c.backlogEvents >= uint64(l.MaxBacklogTotal) || c.backlogBytes+uint64(size) > uint64(l.MaxBacklogBytesTotal)
	}
	for r.n > 0 && overTotal() {
		c.popBacklog(r)
		c.drop(r)
	}
	if size > l.MaxBacklogBytes || overTotal() {
		c.drop(r)
		return
	}
	c.appendBacklog(r, frame)
}

// appendBacklog adds frame at the end of r's backlog, growing the ring.
func (c *Core) appendBacklog(r *receiver, frame []byte) {
	if r.n == len(r.backlog) { // grow the ring, oldest first
		// (At least one more slot: a restored backlog may hold more than
		// max_backlog, had the limit been lowered since it filled.)
		grown := make([][]byte, 0, max(min(c.limits.MaxBacklog, 2*len(r.backlog)+4), r.n+1))
		for i := range r.n {
			grown = append(grown, r.backlog[(r.head+i)%len(r.backlog)])
		}
		r.backlog, r.head = grown[:cap(grown)], 0
	}
	r.backlog[(r.head+r.n)%len(r.backlog)] = frame
	r.n++
	r.bytes += len(frame)
	c.backlogEvents++
	c.backlogBytes += uint64(len(frame))
}

// drop counts one event of r dropped from (or before) its backlog. While r
// is bound the gap in its sequence numbers tells its session at once; while
// it is unbound the next bind's reply reports it.
func (c *Core) drop(r *receiver) {
	c.droppedTotal++
	if r.owner == nil {
		r.dropped++
	}
}

// popBacklog removes and returns r's oldest backlog event.
func (c *Core) popBacklog(r *receiver) []byte {
	frame := r.backlog[r.head]
	r.backlog[r.head] = nil
	r.head = (r.head + 1) % len(r.backlog)
	r.n--
	r.bytes -= len(frame)
	c.backlogEvents--
	c.backlogBytes -= uint64(len(frame))
	if r.n == 0 {
		r.backlog, r.head = nil, 0 // an emptied backlog keeps no memory
	}
	return frame
}

// backlogFrames returns r's backlog, oldest first (for snapshots).
func (r *receiver) backlogFrames() [][]byte {
	out := make([][]byte, r.n)
	for i := range r.n {
		out[i] = r.backlog[(r.head+i)%len(r.backlog)]
	}
	return out
}
