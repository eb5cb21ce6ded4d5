package session

import (
	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Delivery with flow control. A session's pending output — replies and
// events collected this turn plus what the connection has not yet written
// to the socket — is kept at about max_outbound bytes:
//
//   - A firing for a bound receiver goes straight to the session while the
//     session's pending output is under max_outbound and the receiver has
//     no events held back; otherwise it joins the end of the receiver's
//     backlog, which then holds it for the session (the session "stalls").
//   - At the end of every turn (PumpAll), and periodically while any
//     session is stalled, each stalled session is topped up from its
//     receivers' backlogs, in order, as its socket drains. So a bind
//     delivers a backlog of any size to a client that reads, and a burst
//     larger than max_outbound waits in the backlog instead of closing the
//     connection.
//   - A session whose pending output is at max_outbound is not read
//     (MayRead): its requests wait in the inbound buffer until the replies
//     drain.
//
// How much a connection still buffers is I/O: the server reports it as an
// input (Buffered, MayRead, PumpAll and Flush's writer), and the Core
// records it, so a replay makes the same routing decisions.
//
// A backlog is bounded per receiver (max_backlog events, max_backlog_bytes)
// and in total (max_backlog_total, max_backlog_bytes_total); past a bound
// the receiver's oldest event is dropped (see pushBacklog). A drop while the
// receiver is bound shows as a seq gap in what its session receives next; a
// drop while it is unbound is counted in the next bind's reply.
//
// Events handed to a connection that then closes before writing them to
// the socket are lost with it: each session remembers which events it
// handed over and how far the socket has taken its bytes, and closing
// counts the ones left behind in their receivers' dropped counts, which the
// next bind reports. (Events already in the kernel's socket buffer when the
// peer resets the connection are beyond the server's sight.)

// inflight is an event, or a dropped notice, handed to a session's
// connection: its receiver, where its frame ends in the session's output
// stream (Session.written), for a notice how many seqs it announces (0:
// an event), and its frame's length (counted in Core.inflightBytes).
type inflight struct {
	receiver uint64
	end      uint64
	dropped  uint64
	size     uint64
}

// outboundFloor is the pending output (at most a quarter of max_outbound)
// below which a session takes events even when all connections together
// hold max_outbound_total: sessions that do not read cannot stop the ones
// that do. readerFloor replaces it for a session whose connection held
// nothing unsent at its last report (its socket takes what it is given):
// a reader whose burst of one turn is larger than outboundFloor would
// otherwise have the rest of it queued, and dropped once the backlogs of
// the sessions that do not read fill max_backlog_bytes_total. A session
// that does not read has that much at most once, at its first burst: then
// its connection holds bytes.
const (
	outboundFloor = 64 << 10
	readerFloor   = 4 * outboundFloor
)

// room reports whether session s, with pend bytes pending, may be handed
// one more event: its pending output is under max_outbound, and the
// events handed to all connections and not yet in the kernel are under
// max_outbound_total (or pend is under the floor: readerFloor when s's
// connection buffered nothing at its last report, else outboundFloor,
// each at most a quarter of max_outbound).
func (c *Core) room(s *Session, pend int) bool {
	l := &c.limits
	floor := outboundFloor
	if s.buffered == 0 {
		floor = readerFloor
	}
	return pend < l.MaxOutbound &&
		(c.inflightBytes < uint64(l.MaxOutboundTotal) || pend < min(floor, l.MaxOutbound/4))
}

// handOver lists the event of receiver that ends s.out (size bytes) as
// in flight.
func (c *Core) handOver(s *Session, receiver uint64, size int) {
	s.inflight = append(s.inflight, inflight{receiver: receiver, end: s.written + uint64(len(s.out)), size: uint64(size)})
	c.inflightBytes += uint64(size)
}

// pending returns the bytes queued to s and not yet written to its socket,
// as last reported.
func (c *Core) pending(s *Session) int { return len(s.out) + s.buffered }

// Buffered tells the Core how many bytes s's connection holds that it has
// not yet written to its socket. Recorded when it changed.
func (c *Core) Buffered(s *Session, n int) {
	if n != s.buffered && !s.closed {
		if !c.lazy(s) {
			c.rec.buffered(s.id, n)
		}
		s.buffered = n
	}
}

// onFire routes one firing to its receiver's session, or to its backlog.
func (c *Core) onFire(f *wheel.Fire) {
	var overdue uint64 // ticks it was overdue when added (first firing only)
	if len(c.sched.plans) > 0 {
		overdue = c.planFire(f) // schedule.go
	}
	if f.Last && c.groups.grouped() {
		c.forgetGroup(f.Key) // bulk.go
	}
	c.firedTotal++
	if c.m.on && f.Tick < c.target && f.Tick > c.skipped { // late (see noteLate)
		c.noteLate(f.Tick)
	}
	r := c.receiver(f.Receiver)
	if r.acked {
		c.fireAcked(r, f, overdue)
		return
	}
	r.seq++
	// Field by field, not a composite literal: the compiler builds a
	// literal on the stack and copies it with wide loads that cannot be
	// forwarded from its narrow stores, a stall that waits for the
	// firing's pending stores to memory (measured: a third of the routing
	// cost in a burst).
	ev := &c.fireBuf
	ev.Receiver, ev.Tid, ev.Tick, ev.Fired = f.Receiver, f.Tid, f.Tick, f.Fired
	ev.Repeat, ev.Last, ev.Data, ev.Seq = uint64(f.Repeat), f.Last, f.Data, r.seq
	ev.Late = c.late(f.Tick) + overdue // 0 if fast-forwarded over; late if the wheel trails tw-time
	s := r.owner
	if s != nil && r.n == 0 && c.room(s, c.pending(s)) {
		at := len(s.out)
		s.out = protocol.AppendFire(s.out, ev)
		c.handOver(s, r.id, len(s.out)-at)
		c.markDirty(s)
		return
	}
	c.scratch = protocol.AppendFire(c.scratch[:0], ev)
	c.pushBacklog(r, c.scratch)
	if s != nil && r.n > 0 {
		c.hold(s, r)
	}
}

// hold notes that r has events held back for its owner s.
func (c *Core) hold(s *Session, r *receiver) {
	if r.queuedIn != s {
		r.queuedIn = s
		s.queue = append(s.queue, r)
	}
	c.stall(s)
}

// stall puts s on the list of sessions the end of each turn tops up.
func (c *Core) stall(s *Session) {
	if !s.stalled {
		s.stalled = true
		c.stalled = append(c.stalled, s)
	}
}

// pump moves events held back for s into its output, oldest first, while
// it has room (pending output under max_outbound, and see room).
func (c *Core) pump(s *Session) {
	pend := c.pending(s)
	kept := s.queue[:0]
	for _, r := range s.queue {
		if r.owner != s || r.queuedIn != s {
			if r.queuedIn == s {
				r.queuedIn = nil
			}
			continue // unbound or taken over: its backlog went with it
		}
		for r.acked && r.sent < r.n && c.room(s, pend) { // the outbox keeps it until acked
			frame := r.q.next()
			s.out = append(s.out, frame...)
			pend += len(frame)
			r.sent++
			c.pumped++
			r.high = max(r.high, r.firstSeq()+uint64(r.sent)-1)
			c.noteReplied(s, len(s.out)-len(frame)) // it leaves after the log has it (outbox.go)
		}
		for !r.acked && r.n > 0 && c.room(s, pend) {
			frame := c.popBacklog(r)
			s.out = append(s.out, frame...)
			pend += len(frame)
			c.handOver(s, r.id, len(frame))
			c.pumped++
		}
		if r.unsent() > 0 {
			kept = append(kept, r)
		} else {
			r.queuedIn = nil
		}
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	if len(s.out) > 0 {
		c.markDirty(s)
	}
}

// Stalled returns the number of sessions with events held back or
// requests unread: while there are any, the server runs PumpAll
// periodically, as sockets drain without raising an event.
func (c *Core) Stalled() int { return len(c.stalled) + len(c.drains) }

// PumpAll tops up every stalled session and lets the ones whose replies
// have drained read again (they are marked dirty, so Flush offers them to
// the writer, which resumes reading). buffered returns how many bytes a
// session's connection still holds (recorded as Buffered). It reports
// whether it moved anything. The server runs it at the end of every turn.
func (c *Core) PumpAll(buffered func(*Session) int) (moved bool) {
	moved = c.drainQuiet(buffered) // quiet.go
	if len(c.stalled) == 0 {
		return moved
	}
	if buffered != nil { // what the sockets took, first: recorded before the pump
		for _, s := range c.stalled {
			if !s.closed {
				c.Buffered(s, buffered(s))
			}
		}
	}
	c.rec.kind(inPumpAll)
	before := c.pumped
	limit := c.limits.MaxOutbound
	kept := c.stalled[:0]
	for _, s := range c.stalled {
		if s.closed || s.quiet() { // a quiet one waits in drains if blocked (quiet.go)
			s.stalled = false
			if !s.closed && s.blocked {
				c.blockQuiet(s)
			}
			continue
		}
		c.pump(s)
		if s.blocked && c.pending(s) < limit {
			s.blocked = false
			c.markDirty(s)
			moved = true
		}
		if len(s.queue) > 0 || s.blocked {
			kept = append(kept, s)
		} else {
			s.stalled = false
		}
	}
	clear(c.stalled[len(kept):])
	c.stalled = kept
	return moved || c.pumped != before
}

// MayRead reports whether s's next request may be read now, its connection
// buffering buffered bytes (recorded as Buffered), or blocks s until its
// pending output drains below max_outbound.
func (c *Core) MayRead(s *Session, buffered int) bool {
	c.Buffered(s, buffered)
	if c.pending(s) < c.limits.MaxOutbound {
		return true
	}
	c.block(s)
	return false
}

// block stops reading s until its pending output drains. Recorded.
func (c *Core) block(s *Session) {
	if c.lazy(s) {
		c.blockQuiet(s)
		return
	}
	if !s.blocked || !s.stalled {
		c.rec.session(inBlock, s.id)
	}
	s.blocked = true
	c.stall(s)
}

// wrote takes note that s's connection buffers n bytes after a write.
// Recorded.
func (c *Core) wrote(s *Session, n int) {
	if !c.lazy(s) {
		c.rec.sessionN(inWrote, s.id, n)
	}
	s.buffered = n
	c.afterWrite(s)
}

// afterWrite runs after s's output was handed to its connection, which
// still buffers buffered bytes of everything written: it forgets the
// events that have reached the kernel, and lets s read again at once if
// its requests were held back and its pending output is now under
// max_outbound (without waiting for the next top-up).
func (c *Core) afterWrite(s *Session) {
	kernel := s.written - uint64(s.buffered)
	i := 0
	for i < len(s.inflight) && s.inflight[i].end <= kernel {
		i++
	}
	if i > 0 {
		for _, e := range s.inflight[:i] {
			c.inflightBytes -= e.size
		}
		s.inflight = s.inflight[:copy(s.inflight, s.inflight[i:])]
	}
	if s.blocked && c.pending(s) < c.limits.MaxOutbound {
		s.blocked = false
	}
}

// loseUnsent counts, when s closes, the events it was handed whose bytes
// never reached the kernel: the last unsent bytes handed to its
// connection, and all of s.out. Each is added to its receiver's dropped
// count (which the next bind reports), except for an ephemeral receiver,
// whose events end with the session. So are the seqs that dropped notices
// among those bytes announced (already counted in droppedTotal): the
// client never learnt of those drops.
func (c *Core) loseUnsent(s *Session, unsent int) {
	kernel := s.written - uint64(unsent)
	for _, e := range s.inflight {
		c.inflightBytes -= e.size
		if e.end <= kernel {
			continue
		}
		n := e.dropped
		if n == 0 { // an event
			c.lostTotal++
			c.droppedTotal++
			n = 1
		}
		if ephemeral, bound := s.receivers[e.receiver]; bound && ephemeral {
			continue
		}
		c.receiver(e.receiver).dropped += n
	}
	s.inflight = nil
}

// Writer writes out to s's connection (out is valid only during the call)
// and returns how many bytes the connection then still buffers. It may
// close s (Close runs inside it, on a peer that reset the connection).
type Writer func(s *Session, out []byte) (buffered int)

// Flush hands each dirty session's output to write, one call per session
// (with an empty out for a session that only needs attention: killed, or
// able to read again), records how much its connection then buffers, and
// calls after (when not nil) for the session: the server closes a killed
// connection there, and resumes reading one that may read again.
// A closed session's output is discarded, unless it was killed (its last
// reply says why).
//
// A write to a peer that has reset the connection makes the server close
// the session inside write, and closing a session can mark others dirty:
// Flush is therefore re-entrant by design. A nested call returns at once;
// the outer loop, which reads the dirty list by index, picks up what was
// appended.
func (c *Core) Flush(write Writer, after func(*Session)) {
	if c.flushing {
		return
	}
	c.flushing = true
	for i := 0; i < len(c.dirty); i++ {
		s := c.dirty[i]
		s.dirty = false
		if s.closed && !s.kill {
			s.out = s.out[:0]
			continue
		}
		out := s.out
		if s.held {
			// Only the output before the first that waits for the log
			// leaves; ReleaseHeld marks the session dirty again.
			out, s.holdFrom = out[:s.holdLimit()], 0
			if len(out) == 0 || s.closed {
				continue
			}
		}
		if len(out) > 0 && !s.closed {
			if !c.lazy(s) {
				c.rec.written(s.id, len(out))
			}
			s.writing = len(out)
		}
		if len(out) == len(s.out) {
			s.out = s.out[:0]
			if len(out) > 0 && !s.closed {
				s.noteEnd = 0 // the notice, if any, leaves: nothing to extend
				s.written += uint64(len(out))
			}
		} else {
			out = append([]byte(nil), out...) // s.out keeps the held rest
			c.sent(s, len(out))
		}
		n := write(s, out)
		s.writing = 0
		if cap(s.out) > maxKeptOut && len(s.out) == 0 {
			s.out = nil // a burst's buffer is not kept for the session's life
		}
		if !s.closed {
			c.wrote(s, n)
		}
		if after != nil {
			after(s)
		}
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	c.flushing = false
}

// maxKeptOut is the capacity of a session's output buffer kept between
// turns; a larger one, grown by a burst, is given back.
const maxKeptOut = 1 << 20
