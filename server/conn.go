package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
)

// link is a client connection as the glue sees it: its session and the
// instants (ns since the server's origin) the timeouts are measured from.
// It is the gnet context of the connection. Owned by the event loop.
type link struct {
	sess   *session
	c      gnet.Conn
	opened int64 // accepted
	read   int64 // bytes last arrived
	// partial is when the bytes of a frame that has not arrived whole began
	// to wait in the inbound buffer; 0 when none wait.
	partial int64
	// deferred: its requests outran readBudget and it is in Server.deferred.
	deferred bool
}

// nowNs is the monotonic time in ns since the server's origin.
func (s *Server) nowNs() int64 { return int64(time.Since(s.origin)) }

// OnOpen registers a client session, or learns the event loop from the
// doorbell. A connection the acceptor did not hand over (one made to gnet's
// private listener) is closed.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	switch c.Context().(type) {
	case bellMarker:
		l := c.EventLoop()
		s.loop.Store(&l)
		return nil, gnet.None
	case clientMarker:
	default:
		return nil, gnet.Close
	}
	now := s.nowNs()
	l := &link{sess: s.st.open(c), c: c, opened: now, read: now}
	s.links[l.sess.id] = l
	c.SetContext(l)
	s.retime() // the timeouts' sweep is due for it even on an idle server
	return nil, gnet.None
}

// OnClose forgets the session of a closed connection.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	if l, ok := c.Context().(*link); ok {
		s.conns.Add(-1)
		delete(s.links, l.sess.id)
		// Inside a failed Write the batch being written is not buffered.
		s.st.closeSession(l.sess, c.OutboundBuffered()+l.sess.writing)
		s.log.Debug("connection closed", "session", l.sess.id, "err", err)
		s.flush()
	}
	return gnet.None
}

// OnTraffic decodes and applies every complete frame, then writes replies
// and events with one write per connection.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	l, ok := c.Context().(*link)
	if !ok {
		s.onBell(c)
		return gnet.None
	}
	l.read = s.nowNs()
	// Requests see the current tw-time: the ticker sleeps while nothing is due.
	if s.st.advance() {
		s.st.more = true
	}
	s.readFrames(l)
	s.endTurn()
	s.postIfMore()
	s.retime()
	return gnet.None
}

// helloFrameMax is the largest frame accepted before hello: a hello with a
// name and a token of max_name bytes each, so that a connection that has
// not said hello cannot make the server hold a large partial frame.
func (s *Server) helloFrameMax() int {
	return min(s.cfg.Limits.MaxFrame, 2*s.cfg.Limits.MaxName+64)
}

// readBudget bounds the work one connection's requests may take in one
// turn, in state.work units (a request, or a timer walked by list or
// cancel_all): about a millisecond. The rest of its requests are read in a
// later turn, after the other connections' I/O (see deferRead).
const readBudget = 100_000

// readFrames handles the complete frames in l's inbound buffer, within
// readBudget. It copies the buffer (gnet's Peek) only when a whole frame is
// there, so a frame trickling in byte by byte, or requests held while the
// session may not read, cost nothing per arrival.
func (s *Server) readFrames(l *link) {
	c, sess := l.c, l.sess
	if sess.waiting || sess.kill || sess.closed || !s.st.mayRead(sess) {
		s.checkInbound(l)
		return
	}
	limit := s.cfg.Limits.MaxFrame
	if !sess.hello {
		limit = s.helloFrameMax()
	}
	if !s.frameWhole(l, limit) {
		return
	}
	buf, _ := c.Peek(-1)
	off := 0
	incomplete := false
	start := s.st.work
	for !sess.waiting && !sess.kill && !sess.closed && s.st.mayRead(sess) {
		if s.st.work-start >= readBudget {
			s.deferRead(l)
			break
		}
		payload, n, err := protocol.SplitFrame(buf[off:], limit)
		if errors.Is(err, protocol.ErrIncomplete) {
			incomplete = off < len(buf)
			break
		}
		if err != nil {
			if !sess.hello {
				err = fmt.Errorf("%w (limit max_frame is %d bytes, and %d before hello)", err, s.cfg.Limits.MaxFrame, limit)
			} else {
				err = fmt.Errorf("%w (limit max_frame is %d bytes)", err, limit)
			}
			s.st.malformed(sess, 0, err)
			off = len(buf)
			break
		}
		s.st.handle(sess, payload)
		off += n
		if !sess.hello {
			limit = min(s.cfg.Limits.MaxFrame, s.helloFrameMax())
		} else {
			limit = s.cfg.Limits.MaxFrame
		}
	}
	// gnet's Discard(n) with n <= 0 discards everything buffered, so a
	// partial frame (or frames held back behind a fast-forward) would be
	// lost: discard only what was consumed.
	if off > 0 {
		_, _ = c.Discard(off)
	}
	l.notePartial(incomplete)
	if len(sess.out) > 0 {
		s.st.markDirty(sess)
	}
	s.checkInbound(l)
}

// frameWhole reports whether l's inbound buffer starts with a whole frame
// (or a header that is an error), reading only the header; when it does not,
// it notes the partial frame for the frame timeout.
func (s *Server) frameWhole(l *link, limit int) bool {
	hdr, _ := l.c.Peek(protocol.HeaderSize)
	if len(hdr) < protocol.HeaderSize {
		l.notePartial(len(hdr) > 0)
		return false
	}
	n := int(binary.BigEndian.Uint32(hdr))
	if n == 0 || n > limit || l.c.InboundBuffered() >= protocol.HeaderSize+n {
		return true
	}
	l.notePartial(true)
	return false
}

// notePartial records whether a frame waits incomplete, and since when.
func (l *link) notePartial(incomplete bool) {
	switch {
	case !incomplete:
		l.partial = 0
	case l.partial == 0:
		l.partial = l.read
	}
}

// checkInbound closes a session that keeps sending while it is not read:
// while its replies wait, behind a fast-forward, or while its requests wait
// for their turn (readBudget).
func (s *Server) checkInbound(l *link) {
	sess := l.sess
	if (sess.waiting || sess.blocked || l.deferred) && !sess.kill && l.c.InboundBuffered() > s.cfg.Limits.MaxInbound {
		why := "behind a fast-forward"
		switch {
		case sess.blocked:
			why = "while max_outbound bytes of replies and events wait unread"
		case l.deferred:
			why = "faster than its turns of work handle them"
		}
		s.st.malformed(sess, 0, fmt.Errorf("more than max_inbound (%d bytes) of requests pipelined %s", s.cfg.Limits.MaxInbound, why))
		s.st.markDirty(sess)
	}
}

// deferRead continues reading l's requests in a later turn: the doorbell's,
// which the loop runs after polling every connection once more.
func (s *Server) deferRead(l *link) {
	if !l.deferred {
		l.deferred = true
		s.deferred = append(s.deferred, l)
	}
	s.ring()
}

// isDeferred reports whether c's reading waits for the doorbell's turn.
func isDeferred(c gnet.Conn) bool {
	l, ok := c.Context().(*link)
	return ok && l.deferred
}

// readDeferred reads on the connections whose requests outran readBudget.
func (s *Server) readDeferred() {
	ls := s.deferred
	s.deferred = nil
	for _, l := range ls {
		l.deferred = false
		if !l.sess.closed {
			s.readFrames(l)
		}
	}
}

// maxKeptOut is the capacity of a session's output buffer kept between
// turns; a larger one, grown by a burst, is given back.
const maxKeptOut = 1 << 20

// endTurn ends a turn of the loop: the stalled sessions are topped up, then
// everything is written.
func (s *Server) endTurn() {
	if s.st.pumpAll() || s.pumpWait == 0 {
		s.pumpWait = pumpEvery
	} else if len(s.st.stalled) > 0 {
		s.pumpWait = min(2*s.pumpWait, maxPumpWait)
	}
	s.flush()
}

// flush writes each dirty session's output with one write, closes the
// sessions marked for closing, and resumes reading sessions whose
// fast-forward has been answered.
//
// A write to a peer that has reset the connection makes gnet call OnClose
// inside Write, and closing a session can mark others dirty: flush is
// therefore re-entrant by design. A nested call returns at once; the outer
// loop, which reads the dirty list by index, picks up what it appended.
func (s *Server) flush() {
	st := s.st
	if st.flushing {
		return
	}
	st.flushing = true
	for i := 0; i < len(st.dirty); i++ {
		sess := st.dirty[i]
		sess.dirty = false
		c, _ := sess.conn.(gnet.Conn)
		if c == nil || sess.closed && !sess.kill {
			sess.out = sess.out[:0]
			continue
		}
		if len(sess.out) > 0 {
			out := sess.out
			sess.out = sess.out[:0]
			sess.written += uint64(len(out))
			sess.writing = len(out)
			_, _ = c.Write(out) // may run OnClose for sess
			sess.writing = 0
			if cap(sess.out) > maxKeptOut {
				sess.out = nil // a burst's buffer is not kept for the session's life
			}
			if !sess.closed {
				st.afterWrite(sess, c.OutboundBuffered())
			}
		}
		if sess.kill {
			_ = c.Close()
		} else if !sess.waiting && !sess.blocked && !sess.closed && c.InboundBuffered() > 0 && !isDeferred(c) {
			// Frames held back behind a fast-forward or unread replies.
			// (Not those deferred by readBudget: gnet runs a Wake before it
			// polls again, so waking would not let the others' I/O in.)
			_ = c.Wake(nil)
		}
	}
	clear(st.dirty)
	st.dirty = st.dirty[:0]
	st.flushing = false
}

// sweepEvery is how often the timeouts are checked: a quarter of the
// shortest one, between 10 ms and 1 s (0 when every timeout is off).
func (c *Config) sweepEvery() time.Duration {
	shortest := time.Duration(0)
	for _, d := range []time.Duration{c.Timeouts.Handshake, c.Timeouts.Idle, c.Timeouts.Frame} {
		if d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return 0
	}
	return min(max(shortest/4, 10*time.Millisecond), time.Second)
}

// sweep closes the connections whose timeout has run out, each with an
// error reply (code timeout, id 0) that says which. It runs on the loop when
// sweepAt has passed.
func (s *Server) sweep(now int64) {
	t := &s.cfg.Timeouts
	for _, l := range s.links {
		sess := l.sess
		if sess.kill || sess.closed {
			continue
		}
		var why string
		switch {
		case !sess.hello && t.Handshake > 0 && now-l.opened > int64(t.Handshake):
			why = fmt.Sprintf("no hello within %v (timeouts.handshake)", t.Handshake)
		case l.partial != 0 && t.Frame > 0 && now-l.partial > int64(t.Frame):
			why = fmt.Sprintf("a frame started %v ago is still incomplete (timeouts.frame)", t.Frame)
		case sess.hello && t.Idle > 0 && now-l.read > int64(t.Idle):
			why = fmt.Sprintf("no request for %v (timeouts.idle): a client pings while it has nothing else to send", t.Idle)
		default:
			continue
		}
		s.st.rlog.Info("closing a connection: timeout", "session", sess.id, "name", sess.name, "why", why)
		sess.out = protocol.AppendError(sess.out, 0, protocol.CodeTimeout, why)
		sess.kill = true
		s.st.markDirty(sess)
	}
	s.sweepAt = now + int64(s.sweepEvery)
}
