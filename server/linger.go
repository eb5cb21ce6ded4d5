package server

import (
	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/session"
)

// A connection marked for closing (a timeout, a malformed frame, repeated
// bad hellos) has its last reply, the error that says why, at the end of
// its output. gnet's Close writes what it still buffers only as far as the
// kernel takes it at once and drops the rest, so a session that had
// stopped reading (its kernel buffer full, gnet holding more) lost the
// error and saw its stream cut inside a frame.
//
// closeKilled therefore closes the connection at once only when gnet has
// handed everything, the error included, to the kernel: the stream then
// ends on a frame boundary. Otherwise the session is closed in the Core at
// once (no more output is routed to it; what gnet still buffers counts as
// not sent, as for any close: its events are added to their receivers'
// dropped) and the connection lingers, for at most timeouts.frame, while
// gnet writes out what it buffers as the client reads: a client that reads
// again gets complete frames, then the error, then EOF. The sweep closes
// it once gnet's buffer is empty or the linger is over. A client that does
// not read within it is cut where the kernel stopped taking bytes, which
// may be inside a frame: bytes in the kernel's send buffer are beyond
// gnet's (and our) reach, and a connection is not kept open for ever.
// With timeouts.frame off (0 or less), the connection is closed at once.

// closeKilled closes sess's connection c, marked for closing, or lets it
// linger (see above). Owned by the event loop.
func (s *Server) closeKilled(c gnet.Conn, sess *session.Session) {
	l, ok := c.Context().(*link)
	if !ok || l.lingerUntil != 0 {
		return
	}
	buffered := c.OutboundBuffered()
	if buffered == 0 || s.cfg.Timeouts.Frame <= 0 {
		_ = c.Close()
		return
	}
	s.core.Close(sess, buffered)
	l.lingerUntil = s.nowNs() + int64(s.cfg.Timeouts.Frame)
	s.retime()
}

// lingerOver reports whether lingering connection l may be closed now: gnet
// has written out everything, or its time is up. It closes it then.
func (s *Server) lingerOver(l *link, now int64) bool {
	if l.lingerUntil == 0 {
		return false
	}
	if l.c.OutboundBuffered() == 0 || now >= l.lingerUntil {
		_ = l.c.Close()
	}
	return true
}
