package session

import (
	"fmt"
	"slices"
)

// Traffic that changes nothing writes nothing to the log.
//
// A session's own fields — its hello (name, admin rights, failed hellos,
// the kill they cause) and its output stream's bookkeeping (bytes written,
// pending, buffered by its connection, blocked) — matter to the rest of
// the state only while the session is not quiet: while it has receivers
// bound, events in flight or held for it, or a fast-forward's reply due.
// A quiet session's requests that change nothing (anything before a
// successful hello, failed hellos, reads, refusals), its writes and what
// its connection reports are not recorded: the Core marks the session
// stale instead. Before the next recorded input of the session itself (a
// request that changes state, which is the only way out of quiet), one
// inSync input records those fields as they are, absolutely, and the
// replay takes them. The replay of a stale session's fields is therefore
// behind until then, which nothing can observe: no decision that depends
// on another session reads them.
//
// A session that is not quiet has its stream recorded as before (output a
// replay does not reproduce as inPad), since where each event lies in it
// decides whether the event was lost with the connection; its hello
// changes only its own fields and is synced the same way.
//
// A quiet session whose pending output is at max_outbound is not read; it
// waits in Core.drains (not Core.stalled, which is state) until its
// connection drains.

// quiet reports whether nothing in the state outside s depends on s's own
// fields: s has no receivers bound, no event handed to its connection
// that may not have reached the kernel, no receiver queued for it, and no
// fast-forward's reply due.
func (s *Session) quiet() bool {
	return len(s.receivers) == 0 && len(s.inflight) == 0 && len(s.queue) == 0 && !s.waiting
}

// lazy reports whether a change to s's own fields may go unrecorded (s is
// quiet), and if so notes that the record is behind on s (when recording).
func (c *Core) lazy(s *Session) bool {
	if !s.quiet() {
		return false
	}
	if c.rec.on {
		s.stale = true
	}
	return true
}

// unreproduced takes n bytes of s's output that no recorded input
// reproduces: recorded as a pad, unless s is quiet.
func (c *Core) unreproduced(s *Session, n int) {
	if n > 0 && !c.lazy(s) {
		c.rec.pad(inPad, s.id, n)
	}
}

// Flags of an inSync input.
const (
	syncHello  = 1 << iota
	syncAdmin  // with syncHello
	syncKill   // the connection is to be closed
	syncStream // the stream's fields follow (a quiet session's)
	syncBlocked
	syncPlain // the session's error replies are plain (Session.plain)
)

// appendSync appends an inSync input with s's own fields to b.
func appendSync(b []byte, s *Session) []byte {
	r := recorder{buf: b}
	var flags byte
	set := func(bit byte, on bool) {
		if on {
			flags |= bit
		}
	}
	set(syncHello, s.hello)
	set(syncAdmin, s.admin)
	set(syncKill, s.kill)
	set(syncStream, s.quiet())
	set(syncBlocked, s.blocked)
	set(syncPlain, s.plain)
	r.buf = append(r.buf, inSync)
	r.uv(s.id)
	r.buf = append(r.buf, flags)
	r.uv(uint64(s.authFailures))
	r.uv(uint64(len(s.name)))
	r.buf = append(r.buf, s.name...)
	if flags&syncStream != 0 {
		for _, v := range []uint64{s.written, uint64(len(s.out)), uint64(s.buffered),
			uint64(s.noteStart), uint64(s.noteEnd), s.noteRecv, s.noteFirst, s.noteLast} {
			r.uv(v)
		}
	}
	return r.buf
}

// syncSession records s's own fields when the record is behind on them.
func (c *Core) syncSession(s *Session) {
	c.logOpen(s)
	if s.stale && c.rec.on {
		c.rec.raw(appendSync(c.syncBuf[:0], s))
		s.stale = false
	}
}

// settle records everything the record holds back: the advance not yet
// recorded and the fields of every stale session. After it, a replay of
// the record reaches the live state field for field (the tests compare
// them); nothing else needs it.
func (c *Core) settle() {
	if !c.rec.begin() {
		return
	}
	for _, id := range sortedKeys(c.sessions) {
		c.syncSession(c.sessions[id])
	}
	c.noteSessions()
}

// replaySync applies an inSync input.
func (c *Core) replaySync(d *decoder) error {
	s, flags, failures, name := d.session(c), d.byte(), d.uv(), d.bytes()
	var f [8]uint64
	if flags&syncStream != 0 {
		for i := range f {
			f[i] = d.uv()
		}
	}
	if d.err != nil {
		return d.err
	}
	out, start, end := f[1], f[3], f[4]
	if flags&syncStream != 0 && (out > 1<<30 || f[2] > 1<<40 || end > out || end > 0 && start > end) {
		return fmt.Errorf("session %d: sync of %d bytes pending, %d buffered, a notice at %d..%d", s.id, out, f[2], start, end)
	}
	s.hello, s.admin, s.kill = flags&syncHello != 0, flags&syncAdmin != 0, flags&syncKill != 0
	s.authFailures, s.name, s.plain = int(failures), string(name), flags&syncPlain != 0
	if flags&syncStream != 0 {
		s.written, s.buffered = f[0], int(f[2])
		s.out = append(s.out[:0], make([]byte, out)...) // what it holds is not reproduced
		s.noteStart, s.noteEnd, s.noteRecv, s.noteFirst, s.noteLast = int(start), int(end), f[5], f[6], f[7]
		s.blocked = flags&syncBlocked != 0
	}
	return nil
}

// blockQuiet stops reading quiet session s until its pending output
// drains below max_outbound: it waits in drains, topped up by PumpAll.
func (c *Core) blockQuiet(s *Session) {
	s.blocked = true
	if !s.draining {
		s.draining = true
		c.drains = append(c.drains, s)
	}
}

// drainQuiet lets the quiet sessions in drains whose pending output is
// now under max_outbound read again (buffered as in PumpAll), and forgets
// those that are closed, no longer blocked or no longer quiet (those wait
// in stalled). It reports whether it let any read again.
func (c *Core) drainQuiet(buffered func(*Session) int) (moved bool) {
	c.drains = slices.DeleteFunc(c.drains, func(s *Session) bool {
		if !s.closed && s.blocked && s.quiet() {
			if buffered != nil {
				c.Buffered(s, buffered(s))
			}
			if c.pending(s) >= c.limits.MaxOutbound {
				return false // it waits on
			}
			s.blocked = false
			c.lazy(s)
			c.markDirty(s)
			moved = true
		}
		s.draining = false
		return true
	})
	return moved
}

// unquiet puts s, which just stopped being quiet while blocked, on the
// stalled list: from now on PumpAll lets it read again.
func (c *Core) unquiet(s *Session, wasQuiet bool) {
	if wasQuiet && s.blocked && !s.quiet() {
		c.stall(s)
	}
}
