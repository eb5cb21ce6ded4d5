package server

import (
	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Delivery with flow control. A session's pending output — replies and
// events collected this turn plus what the connection has not yet written to
// the socket — is kept at about max_outbound bytes:
//
//   - A firing for a bound receiver goes straight to the session while the
//     session's pending output is under max_outbound and the receiver has no
//     events held back; otherwise it joins the end of the receiver's backlog,
//     which then holds it for the session (the session "stalls").
//   - At the end of every turn, and every pumpEvery (up to maxPumpWait while
//     nothing moves) while any session is stalled, each stalled session is topped up from its receivers'
//     backlogs, in order, as its socket drains. So a bind delivers a backlog
//     of any size to a client that reads, and a burst larger than
//     max_outbound waits in the backlog instead of closing the connection.
//   - A session whose pending output is at max_outbound is not read: its
//     requests wait in the inbound buffer until the replies drain, and a
//     client that sends more than max_inbound bytes meanwhile is closed.
//
// A backlog is bounded per receiver (max_backlog events, max_backlog_bytes)
// and in total (max_backlog_total, max_backlog_bytes_total); past a bound the
// receiver's oldest event is dropped (see pushBacklog). A drop while the
// receiver is bound shows as a seq gap in what its session receives next; a
// drop while it is unbound is counted in the next bind's reply.
//
// Events handed to a connection that then closes before writing them to the
// socket are lost with it: each session remembers which events it handed
// over and how far the socket has taken its bytes, and closing counts the
// ones left behind in their receivers' dropped counts, which the next bind
// reports. (Events already in the kernel's socket buffer when the peer
// resets the connection are beyond the server's sight.)

// pumpEvery is how often stalled sessions are topped up when nothing else
// runs the loop: the socket's draining raises no event. While top-ups move
// nothing (a client that does not read at all) the wait doubles up to
// maxPumpWait, so a stuck client costs next to no CPU.
const (
	pumpEvery   = 2_000_000  // ns
	maxPumpWait = 64_000_000 // ns
)

// inflight is an event handed to a session's connection: its receiver, and
// where its frame ends in the session's output stream (session.written).
type inflight struct {
	receiver uint64
	end      uint64
}

// pending returns the bytes queued to s and not yet written to its socket.
func (st *state) pending(s *session) int {
	n := len(s.out)
	if s.conn != nil {
		n += s.conn.OutboundBuffered()
	}
	return n
}

// onFire routes one firing to its receiver's session, or to its backlog.
func (st *state) onFire(f *wheel.Fire) {
	st.firedTotal++
	r := st.receiver(f.Receiver)
	r.seq++
	// Field by field, not a composite literal: the compiler builds a literal
	// on the stack and copies it with wide loads that cannot be forwarded
	// from its narrow stores, a stall that waits for the firing's pending
	// stores to memory (measured: a third of the routing cost in a burst).
	ev := &st.fireBuf
	ev.Receiver, ev.Tid, ev.Tick, ev.Fired = f.Receiver, f.Tid, f.Tick, f.Fired
	ev.Repeat, ev.Last, ev.Data, ev.Seq = uint64(f.Repeat), f.Last, f.Data, r.seq
	s := r.owner
	if s != nil && r.n == 0 && st.pending(s) < st.cfg.Limits.MaxOutbound {
		s.out = protocol.AppendFire(s.out, ev)
		s.inflight = append(s.inflight, inflight{r.id, s.written + uint64(len(s.out))})
		st.markDirty(s)
		return
	}
	st.pushBacklog(r, protocol.AppendFire(nil, ev))
	if s != nil && r.n > 0 {
		st.hold(s, r)
	}
}

// hold notes that r has events held back for its owner s.
func (st *state) hold(s *session, r *receiver) {
	if r.queuedIn != s {
		r.queuedIn = s
		s.queue = append(s.queue, r)
	}
	st.stall(s)
}

// stall puts s on the list of sessions the end of each turn tops up.
func (st *state) stall(s *session) {
	if !s.stalled {
		s.stalled = true
		st.stalled = append(st.stalled, s)
	}
}

// pump moves events held back for s into its output, oldest first, while
// its pending output is under max_outbound.
func (st *state) pump(s *session) {
	limit := st.cfg.Limits.MaxOutbound
	pend := st.pending(s)
	kept := s.queue[:0]
	for _, r := range s.queue {
		if r.owner != s || r.queuedIn != s {
			if r.queuedIn == s {
				r.queuedIn = nil
			}
			continue // unbound or taken over: its backlog went with it
		}
		for r.n > 0 && pend < limit {
			frame := st.popBacklog(r)
			s.out = append(s.out, frame...)
			pend += len(frame)
			s.inflight = append(s.inflight, inflight{r.id, s.written + uint64(len(s.out))})
		}
		if r.n > 0 {
			kept = append(kept, r)
		} else {
			r.queuedIn = nil
		}
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	if len(s.out) > 0 {
		st.markDirty(s)
	}
}

// pumpAll tops up every stalled session and lets the ones whose replies
// have drained read again (they are marked dirty: the glue wakes them). It
// runs at the end of every turn, and reports whether it moved anything.
func (st *state) pumpAll() (moved bool) {
	if len(st.stalled) == 0 {
		return false
	}
	before := st.backlogEvents
	limit := st.cfg.Limits.MaxOutbound
	kept := st.stalled[:0]
	for _, s := range st.stalled {
		if s.closed {
			s.stalled = false
			continue
		}
		st.pump(s)
		if s.blocked && st.pending(s) < limit {
			s.blocked = false
			st.markDirty(s)
			moved = true
		}
		if len(s.queue) > 0 || s.blocked {
			kept = append(kept, s)
		} else {
			s.stalled = false
		}
	}
	clear(st.stalled[len(kept):])
	st.stalled = kept
	return moved || st.backlogEvents != before
}

// mayRead reports whether s's next request may be read now, or blocks s
// until its pending output drains below max_outbound.
func (st *state) mayRead(s *session) bool {
	if st.pending(s) < st.cfg.Limits.MaxOutbound {
		return true
	}
	s.blocked = true
	st.stall(s)
	return false
}

// afterWrite runs after the glue handed s's output to its connection, which
// still buffers the last buffered bytes of it: it forgets the events that
// have reached the kernel, and lets s read again at once if its requests
// were held back and its pending output is now under max_outbound (without
// waiting for the next top-up).
func (st *state) afterWrite(s *session, buffered int) {
	kernel := s.written - uint64(buffered)
	i := 0
	for i < len(s.inflight) && s.inflight[i].end <= kernel {
		i++
	}
	if i > 0 {
		s.inflight = s.inflight[:copy(s.inflight, s.inflight[i:])]
	}
	if s.blocked && st.pending(s) < st.cfg.Limits.MaxOutbound {
		s.blocked = false
	}
}

// loseUnsent counts, when s closes, the events it was handed whose bytes
// never reached the kernel: the last unsent bytes handed to its connection,
// and all of s.out. Each is added to its receiver's dropped count (which the
// next bind reports), except for an ephemeral receiver, whose events end
// with the session.
func (st *state) loseUnsent(s *session, unsent int) {
	kernel := s.written - uint64(unsent)
	for _, e := range s.inflight {
		if e.end <= kernel {
			continue
		}
		st.lostTotal++
		st.droppedTotal++
		if ephemeral, bound := s.receivers[e.receiver]; bound && ephemeral {
			continue
		}
		st.receiver(e.receiver).dropped++
	}
	s.inflight = nil
}

// pushBacklog appends frame to r's backlog. Past a bound it first drops r's
// oldest events: while r holds max_backlog events or its bytes would pass
// max_backlog_bytes, and while all backlogs together hold max_backlog_total
// events or their bytes would pass max_backlog_bytes_total. When r holds no
// event to drop and a total bound is still reached, the new event is
// dropped instead. Every drop is counted (see drop).
func (st *state) pushBacklog(r *receiver, frame []byte) {
	l := &st.cfg.Limits
	size := len(frame)
	for r.n > 0 && (r.n >= l.MaxBacklog || r.bytes+size > l.MaxBacklogBytes) {
		st.popBacklog(r)
		st.drop(r)
	}
	overTotal := func() bool {
		return st.backlogEvents >= uint64(l.MaxBacklogTotal) || st.backlogBytes+uint64(size) > uint64(l.MaxBacklogBytesTotal)
	}
	for r.n > 0 && overTotal() {
		st.popBacklog(r)
		st.drop(r)
	}
	if l.MaxBacklog == 0 || size > l.MaxBacklogBytes || overTotal() {
		st.drop(r)
		return
	}
	if r.n == len(r.backlog) { // grow the ring, oldest first
		grown := make([][]byte, 0, min(l.MaxBacklog, 2*len(r.backlog)+4))
		for i := range r.n {
			grown = append(grown, r.backlog[(r.head+i)%len(r.backlog)])
		}
		r.backlog, r.head = grown[:cap(grown)], 0
	}
	r.backlog[(r.head+r.n)%len(r.backlog)] = frame
	r.n++
	r.bytes += size
	st.backlogEvents++
	st.backlogBytes += uint64(size)
}

// drop counts one event of r dropped from (or before) its backlog. While r
// is bound the gap in its sequence numbers tells its session at once; while
// it is unbound the next bind's reply reports it.
func (st *state) drop(r *receiver) {
	st.droppedTotal++
	if r.owner == nil {
		r.dropped++
	}
}

// popBacklog removes and returns r's oldest backlog event.
func (st *state) popBacklog(r *receiver) []byte {
	frame := r.backlog[r.head]
	r.backlog[r.head] = nil
	r.head = (r.head + 1) % len(r.backlog)
	r.n--
	r.bytes -= len(frame)
	st.backlogEvents--
	st.backlogBytes -= uint64(len(frame))
	if r.n == 0 {
		r.backlog, r.head = nil, 0 // an emptied backlog keeps no memory
	}
	return frame
}
