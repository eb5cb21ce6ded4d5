package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/session"
)

// link is a client connection as the glue sees it: its session and the
// instants (ns since the server's origin) the timeouts are measured from.
// It is the gnet context of the connection. Owned by the event loop.
type link struct {
	sess   *session.Session
	c      gnet.Conn
	opened int64 // accepted
	read   int64 // bytes last arrived
	// partial is when the bytes of a frame that has not arrived whole began
	// to wait in the inbound buffer; 0 when none wait.
	partial int64
	// deferred: its requests outran readBudget and it is in Server.deferred.
	deferred bool
	// lingerUntil, when not 0, is when a connection marked for closing,
	// whose session is closed, is closed even if gnet still buffers output
	// for it (linger.go).
	lingerUntil int64
	// gone: closed at a change of leadership (cluster mode); its session
	// is the old Core's.
	gone bool
	// clusterOp: its cluster op's reply is due (membership.go); its next
	// requests wait for it, so that replies keep request order.
	clusterOp bool
}

// followerMarker is the context of a client connection to a cluster
// follower: its first request is answered not_leader and it is closed.
type followerMarker struct{}

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
	m := c.Context().(clientMarker)
	if s.replica != nil && !s.replica.leading {
		s.openFollower(c) // replica.go
		return nil, gnet.None
	}
	now := s.nowNs()
	sess := s.core.Open()
	sess.Conn = c
	if a := c.RemoteAddr(); a != nil {
		sess.Remote = a.String()
	}
	if m.remote != "" { // TLS: the pair's peer is the server itself
		sess.Remote = m.remote
	}
	opened := now
	if m.accepted != 0 { // TLS: the hello's deadline counts from the TCP accept
		opened = m.accepted
	}
	l := &link{sess: sess, c: c, opened: opened, read: now}
	s.links[sess.ID()] = l
	c.SetContext(l)
	s.retime() // the timeouts' sweep is due for it even on an idle server
	return nil, gnet.None
}

// OnClose forgets the session of a closed connection.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	if m, ok := c.SafeContext().(clientMarker); ok && m.closed != nil {
		m.closed() // a TLS connection's copy out ends (tlsconn.go)
	}
	if _, ok := c.Context().(followerMarker); ok {
		s.conns.Add(-1)
		return gnet.None
	}
	if l, ok := c.Context().(*link); ok {
		s.conns.Add(-1)
		s.count(&s.closed)
		if l.gone { // closed at a change of leadership
			return gnet.None
		}
		delete(s.links, l.sess.ID())
		s.core.Close(l.sess, c.OutboundBuffered())
		s.log.Debug("connection closed", "session", l.sess.ID(), "err", err)
		s.flush()
	}
	return gnet.None
}

// OnTraffic decodes and applies every complete frame, then writes replies
// and events with one write per connection.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	l, ok := c.Context().(*link)
	if !ok {
		if _, ok := c.Context().(followerMarker); ok {
			return s.refuseFollower(c)
		}
		s.onBell(c)
		return gnet.None
	}
	if l.gone {
		return gnet.Close
	}
	if l.lingerUntil != 0 { // closed, writing out its last frames: nothing more is read
		_, _ = c.Discard(-1)
		return gnet.None
	}
	s.count(&s.requestTurns)
	l.read = s.nowNs()
	s.beginTurn(l.read)
	// Requests see the current tw-time: the ticker sleeps while nothing is due.
	if s.advance() {
		s.more = true
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
	if !s.mayRead(l) {
		s.checkInbound(l)
		return
	}
	limit := s.cfg.Limits.MaxFrame
	if !sess.HelloDone() {
		limit = s.helloFrameMax()
	}
	if !s.frameWhole(l, limit) {
		return
	}
	buf, _ := c.Peek(-1)
	off := 0
	incomplete := false
	start := s.core.Work()
	for s.mayRead(l) {
		if s.core.Work()-start >= readBudget {
			s.deferRead(l)
			break
		}
		payload, n, err := protocol.SplitFrame(buf[off:], limit)
		if errors.Is(err, protocol.ErrIncomplete) {
			incomplete = off < len(buf)
			break
		}
		if err != nil {
			if !sess.HelloDone() {
				err = fmt.Errorf("%w (limit max_frame is %d bytes, and %d before hello)", err, s.cfg.Limits.MaxFrame, limit)
			} else {
				err = fmt.Errorf("%w (limit max_frame is %d bytes)", err, limit)
			}
			s.core.Malformed(sess, 0, err)
			off = len(buf)
			break
		}
		s.core.Apply(sess, payload)
		off += n
		if !sess.HelloDone() {
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
		s.m.bytesIn += uint64(off)
	}
	l.notePartial(incomplete)
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
// while its replies wait, behind a fast-forward or a cluster op, or while
// its requests wait for their turn (readBudget).
func (s *Server) checkInbound(l *link) {
	sess := l.sess
	if (sess.Waiting() || l.clusterOp || sess.Blocked() || l.deferred) && !sess.Killed() && l.c.InboundBuffered() > s.cfg.Limits.MaxInbound {
		why := "behind a fast-forward"
		switch {
		case l.clusterOp:
			why = "behind a cluster op"
		case sess.Blocked():
			why = "while max_outbound bytes of replies and events wait unread"
			s.m.slowCloses++
		case l.deferred:
			why = "faster than its turns of work handle them"
		}
		s.core.Malformed(sess, 0, fmt.Errorf("more than max_inbound (%d bytes) of requests pipelined %s", s.cfg.Limits.MaxInbound, why))
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
		if !l.sess.Closed() {
			s.readFrames(l)
			s.commit() // a record per connection read keeps each record below max_inbound and the budget's worth
		}
	}
}

// mayRead reports whether l's next request may be read now: not while
// its fast-forward's or cluster op's reply is due, after it was marked for
// closing, or while its pending output is at max_outbound.
func (s *Server) mayRead(l *link) bool {
	sess := l.sess
	if sess.Waiting() || l.clusterOp || sess.Killed() || sess.Closed() {
		return false
	}
	return s.core.MayRead(sess, l.c.OutboundBuffered())
}

// pumpEvery is how often stalled sessions are topped up when nothing else
// runs the loop: the socket's draining raises no event. While top-ups move
// nothing (a client that does not read at all) the wait doubles up to
// maxPumpWait, so a stuck client costs next to no CPU.
const (
	pumpEvery   = 2_000_000  // ns
	maxPumpWait = 64_000_000 // ns
)

// endTurn ends a turn of the loop: the stalled sessions are topped up, the
// turn's record goes to the log, then everything is written.
func (s *Server) endTurn() {
	if s.core.PumpAll(outboundBuffered) || s.pumpWait == 0 {
		s.pumpWait = pumpEvery
	} else if s.core.Stalled() > 0 {
		s.pumpWait = min(2*s.pumpWait, maxPumpWait)
	}
	s.commit()
	s.flush()
	s.endTurnMetrics()
	s.publishMemUse()
	s.populateIndexAhead()
}

// outboundBuffered returns how many bytes sess's connection holds that it
// has not yet written to its socket.
func outboundBuffered(sess *session.Session) int {
	if c, ok := sess.Conn.(gnet.Conn); ok {
		return c.OutboundBuffered()
	}
	return 0
}

// flush writes each dirty session's output with one write, closes the
// sessions marked for closing, and resumes reading sessions whose
// fast-forward has been answered or whose replies have drained (see
// session.Core.Flush, which is re-entrant: a write to a reset peer runs
// OnClose inside it).
func (s *Server) flush() { s.core.Flush(s.writeOut, s.afterFlush) }

// writeOut writes out to sess's connection and returns what the connection
// still buffers.
func (s *Server) writeOut(sess *session.Session, out []byte) int {
	c, ok := sess.Conn.(gnet.Conn)
	if !ok {
		return 0
	}
	if l, ok := c.Context().(*link); ok && l.lingerUntil != 0 {
		return c.OutboundBuffered() // closed: its error was its last frame
	}
	if len(out) > 0 {
		s.m.bytesOut += uint64(len(out))
		if c.OutboundBuffered() > 0 && len(out) > minPiece {
			s.pieces = powerPieces(out, s.pieces[:0])
			_, _ = c.Writev(s.pieces) // behind buffered bytes: copied, piece by piece
			clear(s.pieces)
		} else {
			_, _ = c.Write(out) // may run OnClose for sess
		}
	}
	return c.OutboundBuffered()
}

// minPiece is the smallest piece powerPieces cuts.
const minPiece = 512

// powerPieces cuts out into pieces whose lengths are powers of two, the
// largest first, and a last piece of less than minPiece bytes, appended to
// dst. Behind bytes already buffered, gnet copies each piece of a write
// into a buffer from a pool of power-of-two sizes: a piece of any other
// length takes up to twice its bytes (a turn's 103 KB of events took a
// 128 KiB buffer), which max_outbound does not see. Pieces make what it
// holds what it counts, to within minPiece per write.
func powerPieces(out []byte, dst [][]byte) [][]byte {
	for len(out) > 0 {
		n := len(out)
		if n >= minPiece {
			n = 1 << (bits.Len(uint(n)) - 1)
		}
		dst = append(dst, out[:n:n])
		out = out[n:]
	}
	return dst
}

// afterFlush closes a connection marked for closing once its last output
// is written, and wakes one whose frames were held back behind a
// fast-forward or unread replies. (Not one deferred by readBudget: gnet
// runs a Wake before it polls again, so waking would not let the others'
// I/O in.)
func (s *Server) afterFlush(sess *session.Session) {
	c, ok := sess.Conn.(gnet.Conn)
	switch {
	case !ok:
	case sess.Killed():
		s.closeKilled(c, sess) // linger.go
	case !sess.Waiting() && !sess.Blocked() && !sess.Closed() && c.InboundBuffered() > 0 && !isDeferred(c):
		_ = c.Wake(nil)
	}
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
		if s.lingerOver(l, now) || sess.Killed() || sess.Closed() {
			continue
		}
		var why string
		switch {
		case !sess.HelloDone() && t.Handshake > 0 && now-l.opened > int64(t.Handshake):
			why = fmt.Sprintf("no hello within %v (timeouts.handshake)", t.Handshake)
		case l.partial != 0 && t.Frame > 0 && now-l.partial > int64(t.Frame):
			why = fmt.Sprintf("a frame started %v ago is still incomplete (timeouts.frame)", t.Frame)
		case sess.HelloDone() && t.Idle > 0 && now-l.read > int64(t.Idle):
			why = fmt.Sprintf("no request for %v (timeouts.idle): a client pings while it has nothing else to send", t.Idle)
		default:
			continue
		}
		s.core.Expire(sess, why)
	}
	s.sweepAt = now + int64(s.sweepEvery)
}
