package server

import (
	"log/slog"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// state is everything the server knows: the wheel, the clock, sessions and
// receivers. It is owned by the event loop: every method runs there, so it
// needs no locks. It knows nothing of gnet; the glue in conn.go feeds it
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
	droppedTotal  uint64     // events dropped from backlogs, and lost with closed connections
	lostTotal     uint64     // of droppedTotal, those lost with closed connections
	backlogEvents uint64     // events in all backlogs (held for bound receivers included)
	backlogBytes  uint64     // their bytes
	stalled       []*session // sessions with events held back or requests unread (outbox.go)
	// work counts the requests handled and the timers they walked (list,
	// cancel_all): the glue bounds how much of it one connection's requests
	// may take in one turn (see readBudget).
	work int
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
	// a malformed frame, a timeout, failed authentication.
	kill   bool
	closed bool

	// Flow control (outbox.go). written counts the bytes the glue has
	// handed to the connection, writing those of a write in progress;
	// inflight lists the events handed over and perhaps not yet in the
	// kernel, oldest first. queue holds the receivers with events held back
	// for this session while its pending output is at max_outbound; blocked
	// says its requests are not read for the same reason; stalled says it
	// is in state.stalled.
	written  uint64
	writing  int
	inflight []inflight
	queue    []*receiver
	blocked  bool
	stalled  bool
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
	bytes     int      // bytes of the frames in backlog
	queuedIn  *session // the session whose queue lists r (see session.queue)
	dropped   uint64   // events dropped or lost since it was last bound (reported by the next bind)
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
// their timers and undelivered events, counted in droppedTotal) and a fast-forward it waited for no longer replies. unsent
// is how many of the bytes handed to the connection never reached the
// kernel: the events among them are counted as lost (see lose).
func (st *state) closeSession(s *session, unsent int) {
	if s.closed {
		return
	}
	st.loseUnsent(s, unsent)
	s.closed = true
	delete(st.sessions, s.id)
	for id, ephemeral := range s.receivers {
		r := st.receivers[id]
		r.owner = nil
		if ephemeral { // its timers and undelivered events end with the session
			n := st.wheel.CancelAll(id)
			st.log.Debug("ephemeral receiver released", "session", s.id, "receiver", id, "cancelled", n, "events", r.n)
			for r.n > 0 {
				st.popBacklog(r)
				st.droppedTotal++
			}
			r.dropped = 0
		}
		st.forgetIfIdle(r)
	}
	s.receivers = nil
	s.queue = nil
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
// backlog, no timers and no drop to report: no event of it can be pending or
// lost any more. Its sequence numbers start again at 1 if it is used again.
// While it has timers the record stays, so a connection loss leaves a
// visible seq gap; while it has drops to report, the next bind reports them.
func (st *state) forgetIfIdle(r *receiver) {
	if r.owner == nil && r.n == 0 && r.dropped == 0 && st.wheel.ReceiverLen(r.id) == 0 {
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
