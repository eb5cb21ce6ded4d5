package server

import (
	"log/slog"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// state is everything the server knows: the wheel, the clock, sessions and
// receivers. It is owned by the event loop: every method runs there, so it
// needs no locks. It knows nothing of gnet; the glue in gnet.go feeds it
// frames and writes out what it appends to session.out.
type state struct {
	cfg   Config
	log   *slog.Logger
	rlog  *rateLog // for log lines a peer can cause at will (failed hellos, ...)
	wheel *wheel.Wheel
	clock *wheel.Clock
	// target is tw-time as of the last advance or clock change: the clock's
	// tick, which the wheel may trail while it catches up in bounded turns.
	// Requests are relative to it (see now).
	target uint64

	sessions    map[uint64]*session
	nextSession uint64
	receivers   map[uint64]*receiver
	// recvCache is a direct-mapped cache in front of receivers, for the
	// lookup of every firing; forgetting a receiver clears its entry.
	recvCache [recvCacheSize]*receiver

	dirty    []*session // sessions with output to flush at the end of this turn
	flushing bool       // a flush is running (see Server.flush)
	more     bool       // an advance left work: the glue must post another turn
	waiters  []waiter   // fast-forwards waiting for the wheel to reach their target
	onSpeed  func(speed float64, frozen bool)
	fireBuf  protocol.Fire
	listBuf  []wheel.Info
	timerBuf []protocol.Timer

	firedTotal    uint64
	droppedTotal  uint64
	backlogEvents uint64
}

// outConn is what state needs of a connection: how many bytes it has queued
// but not yet written to the socket.
type outConn interface {
	OutboundBuffered() int
}

// session is one client connection.
type session struct {
	id    uint64
	conn  outConn
	name  string
	hello bool
	admin bool
	// authFailures counts the failed hellos on this connection (helloFailed).
	authFailures int
	// receivers bound by this session, with their ephemeral flag.
	receivers map[uint64]bool
	// out collects replies and events during a turn; the glue writes it with
	// one call per connection per turn.
	out   []byte
	dirty bool
	// waiting is set while a fast-forward of this session is in progress:
	// its next requests are not read until the reply is out, so replies keep
	// request order.
	waiting bool
	// kill asks the glue to close the connection after flushing out:
	// a malformed frame, or a connection that does not read its events.
	kill   bool
	closed bool
}

// receiver is a destination of events: bound to at most one session, and
// otherwise keeping its events in a bounded backlog.
type receiver struct {
	id        uint64
	owner     *session
	ephemeral bool
	seq       uint64   // sequence number of the last event
	backlog   [][]byte // encoded fire frames, oldest first (a ring from head)
	head      int
	n         int
	dropped   uint64 // events dropped since it was last bound
}

// waiter is a fast-forward whose reply is due once the wheel reaches target:
// to session s as the reply to request id, or, for Server.FastForward, on done.
type waiter struct {
	s      *session
	id     uint64
	done   chan [2]uint64 // now, fired
	target uint64
	fired  uint64 // firedTotal when the fast-forward started
}

func newState(cfg Config, log *slog.Logger, w *wheel.Wheel, c *wheel.Clock) *state {
	return &state{
		cfg:       cfg,
		log:       log,
		rlog:      newRateLog(log, 10, time.Now),
		wheel:     w,
		clock:     c,
		target:    c.Now(),
		sessions:  make(map[uint64]*session),
		receivers: make(map[uint64]*receiver),
	}
}

// open registers a new connection.
func (st *state) open(c outConn) *session {
	st.nextSession++
	s := &session{id: st.nextSession, conn: c, receivers: make(map[uint64]bool)}
	st.sessions[s.id] = s
	return s
}

// closeSession forgets s: its receivers become unbound (ephemeral ones lose
// their timers) and a fast-forward it waited for no longer replies.
func (st *state) closeSession(s *session) {
	if s.closed {
		return
	}
	s.closed = true
	delete(st.sessions, s.id)
	for id, ephemeral := range s.receivers {
		r := st.receivers[id]
		r.owner = nil
		if ephemeral {
			n := st.wheel.CancelAll(id)
			st.log.Debug("ephemeral receiver released", "session", s.id, "receiver", id, "cancelled", n)
		}
		st.forgetIfIdle(r)
	}
	s.receivers = nil
	for i := range st.waiters {
		if st.waiters[i].s == s {
			st.waiters[i].s = nil
		}
	}
}

// markDirty queues s for the end-of-turn flush.
func (st *state) markDirty(s *session) {
	if !s.dirty {
		s.dirty = true
		st.dirty = append(st.dirty, s)
	}
}

// receiver returns r's record, creating it.
func (st *state) receiver(id uint64) *receiver {
	slot := &st.recvCache[recvSlot(id)]
	if r := *slot; r != nil && r.id == id {
		return r
	}
	r := st.receivers[id]
	if r == nil {
		r = &receiver{id: id}
		st.receivers[id] = r
	}
	*slot = r
	return r
}

const (
	recvCacheBits = 10
	recvCacheSize = 1 << recvCacheBits
)

// recvSlot spreads receiver ids over the cache (Fibonacci hashing: ids that
// differ only in high bits land apart too).
func recvSlot(id uint64) uint64 { return id * 0x9E3779B97F4A7C15 >> (64 - recvCacheBits) }

// forgetIfIdle drops the record of a receiver that is unbound, has no
// backlog and no timers: no event of it can be pending or lost any more.
// Its sequence numbers start again at 1 if it is used again. While it has
// timers the record stays, so a connection loss leaves a visible seq gap.
func (st *state) forgetIfIdle(r *receiver) {
	if r.owner == nil && r.n == 0 && st.wheel.ReceiverLen(r.id) == 0 {
		delete(st.receivers, r.id)
		if slot := &st.recvCache[recvSlot(r.id)]; *slot == r {
			*slot = nil
		}
	}
}

// tidy forgets receiver id's record if it has become idle (after a cancel).
func (st *state) tidy(id uint64) {
	if r := st.receivers[id]; r != nil {
		st.forgetIfIdle(r)
	}
}

// advance moves the wheel toward the clock's target, firing at most
// MaxFiresPerTurn timers. It reports whether work is left for another turn.
func (st *state) advance() (more bool) {
	st.target = st.clock.Now()
	_, done := st.wheel.Advance(st.target, st.cfg.MaxFiresPerTurn, st.onFire)
	st.answerWaiters(done)
	return !done
}

// now is tw-time for requests: the tick "after" counts from, before which
// "at" is in the past, and that replies report. It is the clock's tick, not
// the wheel's: while the wheel catches up after a burst, a timer added
// "after 1" must not fire with the ticks already gone by.
func (st *state) now() uint64 { return max(st.target, st.wheel.Now()) }

// clockChanged takes tw-time from the clock at once after an admin changed
// it (freeze, resume, speed, fast-forward).
func (st *state) clockChanged() { st.target = max(st.target, st.clock.Now()) }

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
	if s := r.owner; s != nil {
		start := len(s.out)
		s.out = protocol.AppendFire(s.out, ev)
		if st.overOutbound(s) {
			frame := append([]byte(nil), s.out[start:]...)
			s.out = s.out[:start]
			st.dropSlowSession(s)
			// closeSession may just have forgotten r (unbound, empty
			// backlog, this was its last timer): put it back, or this event
			// would go to an orphaned record and be lost.
			st.receivers[r.id] = r
			st.pushBacklog(r, frame)
			return
		}
		st.markDirty(s)
		return
	}
	st.pushBacklog(r, protocol.AppendFire(nil, ev))
}

// overOutbound reports whether s has more bytes queued than MaxOutbound.
func (st *state) overOutbound(s *session) bool {
	queued := len(s.out)
	if s.conn != nil {
		queued += s.conn.OutboundBuffered()
	}
	return queued > st.cfg.Limits.MaxOutbound
}

// dropSlowSession closes a session that does not read what it is sent: its
// receivers become unbound, so their next events wait in their backlogs.
func (st *state) dropSlowSession(s *session) {
	st.log.Warn("closing a connection that does not read its events",
		"session", s.id, "name", s.name, "limit", "max_outbound", "max_outbound", st.cfg.Limits.MaxOutbound)
	s.kill = true
	st.markDirty(s)
	st.closeSession(s)
}

// pushBacklog keeps frame for unbound receiver r, dropping its oldest event
// when its backlog is full, or the new event when all backlogs together hold
// max_backlog_total events.
func (st *state) pushBacklog(r *receiver, frame []byte) {
	max := st.cfg.Limits.MaxBacklog
	if max == 0 || (st.backlogEvents >= uint64(st.cfg.Limits.MaxBacklogTotal) && r.n < max) {
		r.dropped++ // the record stays, so the next bind reports the drop
		st.droppedTotal++
		return
	}
	if r.n == max {
		r.backlog[r.head] = nil
		r.head = (r.head + 1) % len(r.backlog)
		r.n--
		r.dropped++
		st.droppedTotal++
		st.backlogEvents--
	}
	if r.n == len(r.backlog) { // grow the ring, oldest first
		grown := make([][]byte, 0, min(max, 2*len(r.backlog)+4))
		for i := range r.n {
			grown = append(grown, r.backlog[(r.head+i)%len(r.backlog)])
		}
		r.backlog, r.head = grown[:cap(grown)], 0
	}
	r.backlog[(r.head+r.n)%len(r.backlog)] = frame
	r.n++
	st.backlogEvents++
}

// drainBacklog appends r's backlog to s.out in order and empties it.
func (st *state) drainBacklog(r *receiver, s *session) (delivered int) {
	for i := range r.n {
		j := (r.head + i) % len(r.backlog)
		s.out = append(s.out, r.backlog[j]...)
		r.backlog[j] = nil
	}
	delivered = r.n
	st.backlogEvents -= uint64(r.n)
	r.backlog, r.head, r.n = nil, 0, 0
	return delivered
}

// answerWaiters replies to the fast-forwards whose target the wheel reached.
// done is the last Advance's: when it stopped at its max, Now is the tick of
// timers still due, so only targets before Now are reached.
func (st *state) answerWaiters(done bool) {
	if len(st.waiters) == 0 {
		return
	}
	now := st.wheel.Now()
	kept := st.waiters[:0]
	for _, w := range st.waiters {
		switch {
		case w.done != nil && (done || now > w.target):
			w.done <- [2]uint64{now, st.firedTotal - w.fired}
		case w.s == nil && w.done == nil: // its session closed
		case done || now > w.target:
			// (done means now is the clock's target, >= w.target. A bounded
			// Advance that stopped with timers left at w.target leaves
			// now == w.target: answering then would put the reply before
			// some of the events it covers.)
			w.s.out = protocol.AppendOK(w.s.out, w.id, now, st.firedTotal-w.fired)
			w.s.waiting = false
			st.markDirty(w.s)
		default:
			kept = append(kept, w)
		}
	}
	clear(st.waiters[len(kept):])
	st.waiters = kept
}
