// Package session holds the service's rules: sessions, receivers, binding
// and takeover, backlogs, per-receiver sequence numbers, limits, how each
// request changes the wheel, and fast-forward ordering.
//
// A Core is a deterministic state machine. It does no I/O, reads no clock,
// starts no goroutine and takes no lock; every input that depends on time
// carries its tick (Advance's target, the tick a clock op left tw-time at),
// and what it learns from the connections (how many bytes a socket still
// buffers) arrives as an input too. Given the same inputs in the same
// order, two Cores produce the same replies, the same events and the same
// snapshot, byte for byte. That is what makes the write-ahead log work:
// the Core records each state-changing input into the current turn's
// record (TakeRecord), and Replay feeds recorded inputs back in.
//
// The server owns the I/O around it: it opens and closes sessions for
// connections, hands request frames to Apply, runs Advance from its
// tw-time clock, writes out what Flush hands it, and appends each turn's
// record to the log before the turn's replies leave.
package session

import (
	"fmt"
	"log/slog"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// PeerLog logs lines a peer can cause at will (failed hellos, malformed
// frames, takeovers); the server rate-limits it.
type PeerLog interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}

// Core is the service's state: the wheel, the sessions and the receivers.
// It is not safe for concurrent use; one goroutine (the event loop) owns it.
type Core struct {
	cfg Config
	// check is the id of the state check whose mark the last Replay ended
	// with (checkMarked), until TakeCheck (check.go).
	check       uint64
	checkMarked bool
	limits      Limits
	// addOnlyBound is Config.AddOnlyBound as in force: state, like the
	// limits, since it decides which requests succeed (SetAddOnlyBound).
	addOnlyBound bool
	log          *slog.Logger
	peer         PeerLog
	wheel        *wheel.Wheel
	// target is tw-time as of the last Advance or clock op: requests count
	// from it (see now). The wheel may trail it while it catches up.
	target uint64
	// caughtUp says the last Advance reached target: another Advance to the
	// same target changes nothing and is not recorded.
	caughtUp bool
	speed    float64
	frozen   bool
	// skipped is the highest tw-time a fast-forward jumped to: firings due
	// up to it were asked for at once, and are not reported late.
	skipped uint64
	// wallNs and wallTick pair a wall-clock instant (Unix ns) with
	// tw-time then, as last recorded (SetWall): after a restart the server
	// moves tw-time on by the wall-clock time that passed since.
	wallNs, wallTick uint64
	// clockHook applies a clock op to the server's tw-time clock and
	// returns the clock's tick after it (see SetClockHook).
	clockHook func(op ClockOp, arg float64, ticks uint64) uint64
	// instantHook reads where tw-time is inside the current tick (see
	// SetInstantHook); instTick and instSub hold its last reading, or the
	// recorded one during a replay, for the add being applied.
	instantHook       func() (tick, sub uint64)
	instTick, instSub uint64
	// statsHook adds the server's own figures to a stats reply (see
	// SetStatsHook); nil: none.
	statsHook func(*protocol.Stats)
	// clusterHook takes cluster ops (SetClusterHook).
	clusterHook func(*Session, protocol.Request) (protocol.Code, string)

	sessions    map[uint64]*Session
	nextSession uint64
	receivers   map[uint64]*receiver
	recvList    []*receiver // the same records, in no order: a walk of all (receiverSnaps) without the map's
	// recvCache is a direct-mapped cache in front of receivers, for the
	// lookup of every firing; forgetting a receiver clears its entry.
	recvCache [recvCacheSize]*receiver

	dirty    []*Session // sessions with output to flush at the end of this turn
	flushing bool       // a Flush is running (it is re-entrant: see Flush)
	more     bool       // an advance left work: the server must run another turn
	waiters  []waiter   // fast-forwards waiting for the wheel to reach their target
	fireBuf  protocol.Fire
	listBuf  []wheel.Info
	timerBuf []protocol.Timer
	req      protocol.Request

	firedTotal uint64
	// forgotSeq is the highest seq of a receiver in acknowledged mode that
	// retention forgot (retain.go): a new record's events queued in plain
	// mode at or below it are numbered again at a bind with ack (renumber).
	forgotSeq     uint64
	droppedTotal  uint64      // events dropped from backlogs, and lost with closed connections
	lostTotal     uint64      // of droppedTotal, those lost with closed connections
	backlogEvents uint64      // events in all backlogs (held for bound receivers included)
	backlogBytes  uint64      // their bytes
	outboxEvents  uint64      // of backlogEvents, those in outboxes (acknowledged mode)
	outboxBytes   uint64      // their bytes
	pumped        uint64      // events moved from backlogs to sessions by top-ups
	parkedTotal   uint64      // firings waiting for room in an outbox (outbox.go)
	parkedBytes   uint64      // their data bytes
	waiting       []*receiver // receivers with parked firings, in the order their waits began
	scratch       []byte      // an event being encoded for a backlog or an outbox
	stalled       []*Session  // sessions with events held back or requests unread (route.go)
	// drains lists quiet sessions whose requests are unread until their
	// output drains (quiet.go): not state, as their fields are their own.
	drains []*Session
	// work counts the requests handled and the timers they walked (list,
	// cancel_all): the server bounds how much of it one connection's
	// requests may take in one turn.
	work int
	// inflightBytes is the bytes of every session's in-flight entries
	// (events and dropped notices handed to connections and perhaps not
	// yet in the kernel): bounded by max_outbound_total (route.go).
	inflightBytes uint64
	// backlogHeld and outboxHeld are the capacity of the chunks all
	// backlogs, and of them the outboxes, hold their events in: what
	// max_backlog_bytes_total counts (backlog.go).
	backlogHeld, outboxHeld uint64

	// idleHead and idleTail end the list of retained idle receivers in
	// acknowledged mode, oldest idle first; idleN counts it (retain.go).
	idleHead, idleTail *receiver
	idleN              int
	legacyIdle         bool // restoring a snapshot before version 5 (see Restore)

	sched scheduler // calendar schedules and missed-firing policies (schedule.go)
	// groups are the timers' groups and the paused receivers and groups;
	// bulk the bulk operations in progress, oldest first (bulk.go).
	groups groupTable
	bulk   []*bulkOp
	// lists are the list requests whose pages are being gathered, oldest
	// first (listwalk.go): not state.
	lists []*listOp
	// listLeft is the work lists may still do in this loop turn (since the
	// last Advance: the server's turns each begin with one).
	listLeft int
	tidBuf   []uint64    // stepReceiver's tids of a page
	keyBuf   []wheel.Key // listGroup's keys of a page
	m        coreMetrics // operator counters (metrics.go)

	rec recorder // this turn's record of inputs (record.go)
	// replied lists the sessions with a reply to a recorded input this
	// turn: their output must not leave before the turn's record is
	// written (see TakeRecord, HoldReplied).
	replied   []*Session
	taken     []*Session // replied, as of the last TakeRecord
	held      []*Session // sessions whose output waits for the log (HoldReplied)
	replaying bool       // inputs come from Replay: nothing is logged
	syncBuf   []byte     // an inSync input being made (quiet.go)
	// loggedNext is the last session id the record has (noteSessions).
	loggedNext uint64
	// refused: an error reply was made since applyRecorded cleared it.
	refused  bool
	readOnly string // why state-changing requests are refused, or ""
	// readsWait: replies that show the state are noted like a change's
	// (SetReadsWait).
	readsWait bool

	// spareRecvs and spareChunks are a finished snapshot's copies of the
	// receivers' records and their backlog chunk headers, emptied, for
	// the next snapshot to fill (receiverSnaps).
	spareRecvs  []receiverSnap
	spareChunks [][]byte
	spareRefs   []*receiver // scratch of receiverSnaps
	spareRefs2  []*receiver
	snapChunks  int // 1 + the backlog chunk headers the last snapshot copied (0: none taken); receiverSnaps sizes a new copy by it

	// reqIDs remembers recent changes with a request id, for retries
	// (requestid.go). Last, so that it moves none of the fields above.
	reqIDs requestIDs
}

// Session is one client connection's session.
type Session struct {
	id    uint64
	name  string
	hello bool
	admin bool
	// plain says the session's error replies are worded without Go package
	// prefixes ("timer already exists", not "wheel: timer already exists"):
	// set by every hello since issue 28, and recorded with it (helloPlain),
	// so that a replay of a log written before lays out the older, longer
	// replies of its sessions as they were written (replayWritten).
	plain bool
	// authFailures counts the failed hellos on this connection.
	authFailures int
	// receivers bound by this session, with their ephemeral flag.
	receivers map[uint64]bool
	// out collects replies and events during a turn; Flush hands it to
	// the server's writer, one write per connection per turn.
	out   []byte
	dirty bool
	// waiting is set while a fast-forward of this session is in progress:
	// its next requests are not read until the reply is out, so replies
	// keep request order.
	waiting bool
	// listing is set while a list of this session is being gathered over
	// several turns (listwalk.go): its next requests are not read until the
	// reply is out. Not state (a list changes nothing).
	listing bool
	// kill asks the server to close the connection after flushing out: a
	// malformed frame, a timeout, failed authentication.
	kill   bool
	closed bool

	// Flow control (route.go). written counts the bytes handed to the
	// connection, writing those of a write in progress; buffered is how
	// many of them the connection last said it had not yet written to its
	// socket (an input: Buffered). inflight lists the events handed over
	// and perhaps not yet in the kernel, oldest first. queue holds the
	// receivers with events held back for this session while its pending
	// output is at max_outbound; blocked says its requests are not read
	// for the same reason; stalled says it is in Core.stalled.
	written  uint64
	writing  int
	buffered int
	inflight []inflight
	queue    []*receiver
	blocked  bool
	stalled  bool
	// replied: the session is in Core.replied; held: in Core.held, its
	// output kept back until the log is written (not state: I/O timing).
	// replyAt is where in out this turn's first output that needs the
	// turn's record begins (set with replied, read by HoldReplied); while
	// held, out[:holdFrom] needs no unwritten record and may leave (a
	// hello's or bind's reply before an event that waits for the log).
	replied  bool
	held     bool
	replyAt  int
	holdFrom int
	// marks: held by HoldTurn, where the output waiting for each turn's
	// record begins, oldest first (holdFrom is not used then).
	marks []holdMark
	// stale: the record is behind on the session's own fields, which
	// changed while it was quiet; draining: it is in Core.drains (quiet.go).
	// Neither is state.
	stale    bool
	draining bool
	// logged: the record has the session's opening (see logOpen); in a
	// replay and after a restore, every session is.
	logged bool
	// note locates the dropped notice at the end of out, which a drop of
	// the next event of the same receiver extends (see noteDropped):
	// out[noteStart:noteEnd] announces noteRecv's events noteFirst
	// through noteLast. noteEnd 0: none.
	noteStart, noteEnd            int
	noteRecv, noteFirst, noteLast uint64

	// Conn is the server's handle of the connection; the Core never reads it.
	Conn any
	// Remote is the peer's address, for log lines.
	Remote string
}

// ID returns the session id, unique for the life of the state (it goes on
// across restarts).
func (s *Session) ID() uint64 { return s.id }

// Name returns the name the session gave in hello.
func (s *Session) Name() string { return s.name }

// HelloDone reports whether the session has said hello successfully.
func (s *Session) HelloDone() bool { return s.hello }

// Waiting reports whether the reply of the session's fast-forward, bulk
// operation or list is due: its next requests must not be read until then.
func (s *Session) Waiting() bool { return s.waiting || s.listing }

// Blocked reports whether the session's pending output is at max_outbound:
// its requests are not read until it drains.
func (s *Session) Blocked() bool { return s.blocked }

// Killed reports whether the connection is to be closed once its output
// is written.
func (s *Session) Killed() bool { return s.kill }

// Closed reports whether Close has run for the session.
func (s *Session) Closed() bool { return s.closed }

// Pending returns the session's output not yet handed to its connection.
func (s *Session) Pending() int { return len(s.out) }

// receiver is a destination of events: bound to at most one session, and
// otherwise keeping its events in a bounded backlog.
type receiver struct {
	id        uint64
	owner     *Session
	ephemeral bool
	seq       uint64     // sequence number of the last event
	q         frameQueue // the backlog: encoded fire frames, oldest first (in acknowledged mode, the outbox)
	n         int        // frames in q
	bytes     int        // their bytes
	queuedIn  *Session   // the session whose queue lists r (see Session.queue)
	dropped   uint64     // events dropped or lost since it was last bound (reported by the next bind)

	// Acknowledged mode (outbox.go): acked says the backlog is an outbox,
	// whose first sent events were handed to the owner and wait for an
	// ack; parked are firings waiting for room in it; holding the
	// repeating timers the server paused meanwhile.
	// high is the highest seq handed to a connection in acknowledged
	// mode: giving up on an event at or below it (an ephemeral session
	// ending, a drop after acknowledged mode ended) counts it as lost.
	acked   bool
	sent    int
	high    uint64
	parked  parkQueue
	holding map[uint64]struct{}

	// Retention (retain.go): inIdle says r is on the Core's retained
	// list, between idlePrev and idleNext; idleAt is the tick it last
	// became idle in acknowledged mode.
	inIdle             bool
	idleAt             uint64
	idlePrev, idleNext *receiver

	listed int // r's place in Core.recvList
}

// waiter is a fast-forward whose reply is due once the wheel passes
// target: to session s as the reply to request id, or, for FastForward,
// through done.
type waiter struct {
	s      *Session
	id     uint64
	done   func(now, fired uint64)
	target uint64
	fired  uint64 // firedTotal when the fast-forward started
}

// New returns a Core over w, whose tw-time starts at w.Now(). log takes
// debug lines; peer (may be nil) the lines peers can cause.
func New(cfg Config, limits Limits, w *wheel.Wheel, log *slog.Logger, peer PeerLog) *Core {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if peer == nil {
		peer = log
	}
	c := &Core{
		cfg: cfg, limits: limits.WithDefaults(), addOnlyBound: cfg.AddOnlyBound, log: log, peer: peer, wheel: w,
		speed:     1,
		sessions:  make(map[uint64]*Session),
		receivers: make(map[uint64]*receiver),
	}
	c.listLeft = c.listBudget()
	if w != nil {
		c.target = w.Now()
	}
	return c
}

// Wheel returns the Core's wheel, for reading (the server asks it for the
// next event). Changing it other than through the Core breaks replay.
func (c *Core) Wheel() *wheel.Wheel { return c.wheel }

// Limits returns the limits in force.
func (c *Core) Limits() Limits { return c.limits }

// SetLimits changes the limits (the server sets its configured ones after
// recovery). Recorded.
func (c *Core) SetLimits(l Limits) {
	c.limits = l.WithDefaults()
	c.rec.limits(&c.limits)
	c.trimRequestIDs()     // a smaller max_request_ids, or -1: forgotten now
	if c.parkedTotal > 0 { // more room, perhaps
		for _, r := range append([]*receiver(nil), c.waiting...) {
			c.refill(r)
		}
	}
}

// SetAddOnlyBound changes whether sessions may change only the timers of
// receivers they have bound (the server sets its configured value after
// recovery). Recorded.
func (c *Core) SetAddOnlyBound(on bool) {
	c.rec.flag(inAddOnlyBound, on)
	c.addOnlyBound = on
}

// SetWire changes the limits hello reports (not state).
func (c *Core) SetWire(l protocol.Limits) { c.cfg.Wire = l }

// SetReadsWait makes every reply that shows timer state — a get, a list,
// stats, a change refused because of the state (exists, not_found,
// bad_state, a limit) — noted like a change's reply (TakeRecord reports
// it), so that the committer holds it behind the records still in flight:
// the state it shows may include changes not yet committed, which a
// replicated log's leader may lose (a cluster's leader sets it: no client
// sees a change that never commits, and the reads are linearizable). Off
// (the default): such replies leave at once. Not state.
func (c *Core) SetReadsWait(on bool) { c.readsWait = on }

// SetReadOnly makes state-changing requests fail with code unavailable
// and why (the log cannot be written), or, with "", accepted again. A
// refused request changes nothing and is not recorded.
func (c *Core) SetReadOnly(why string) { c.readOnly = why }

// Open registers a new session. Recorded once it matters (see logOpen).
func (c *Core) Open() *Session {
	c.nextSession++
	s := &Session{id: c.nextSession, receivers: make(map[uint64]bool)}
	c.sessions[s.id] = s
	return s
}

// openID opens session sid for a replay: ids are recorded when a session
// first matters, so they may come out of order, and a snapshot may have
// taken a session before the log did (it is kept as it is).
func (c *Core) openID(sid uint64) error {
	if sid == 0 {
		return fmt.Errorf("open of session 0")
	}
	if c.sessions[sid] == nil {
		c.sessions[sid] = &Session{id: sid, receivers: make(map[uint64]bool), logged: true}
	}
	c.nextSession = max(c.nextSession, sid)
	return nil
}

// logOpen records the opening of s if it is not yet: before its first
// recorded input, or when it learns its id (a successful hello), which
// then stays unique across a restart. A session that never gets so far
// (failed hellos, nothing but refused requests) costs the log nothing.
func (c *Core) logOpen(s *Session) {
	if !s.logged && c.rec.on {
		s.logged = true
		c.rec.open(s.id)
		c.loggedNext = max(c.loggedNext, s.id)
	}
}

// noteSessions records the last session id handed out when the record
// does not have it (sessions open unrecorded: see logOpen), so that a
// restart hands out no id again that a session had before the last record.
func (c *Core) noteSessions() {
	if c.nextSession > c.loggedNext && c.rec.begin() {
		c.rec.buf = append(c.rec.buf, inNextSession)
		c.rec.uv(c.nextSession)
		c.loggedNext = c.nextSession
	}
}

// Close forgets s: its receivers become unbound (ephemeral ones lose their
// timers and undelivered events, counted as dropped) and a fast-forward it
// waited for no longer replies. buffered is how many bytes the connection
// still held, not written to its socket; they, and a write in progress
// (Close may run inside Flush's writer), never reached the kernel: the
// events among them are counted as lost. Recorded.
func (c *Core) Close(s *Session, buffered int) {
	if s.closed {
		return
	}
	unsent := buffered + s.writing
	if s.logged {
		c.rec.close(s.id, unsent)
	}
	c.loseUnsent(s, unsent)
	s.closed = true
	delete(c.sessions, s.id)
	for _, id := range sortedKeys(s.receivers) { // by id: the retained list's order is state (retain.go)
		ephemeral := s.receivers[id]
		r := c.receivers[id]
		r.owner = nil
		r.releaseAcked()
		if ephemeral { // its timers and undelivered events end with the session
			c.forgetReceiverGroups(id)
			n := c.wheel.CancelAll(id)
			c.dropPlans(id)
			c.log.Debug("ephemeral receiver released", "session", s.id, "receiver", id, "cancelled", n, "events", r.n)
			for r.n > 0 {
				c.giveUp(r)
			}
			c.dropParked(r)
			c.endAcked(r) // an ephemeral receiver's mode ends with it too
			r.dropped = 0
		}
		c.forgetIfIdle(r)
	}
	s.receivers = nil
	s.queue = nil
	if c.parkedTotal > 0 {
		c.refillWaiting() // the outboxes of ephemeral receivers it dropped were room for all
	}
	for i := range c.waiters {
		if c.waiters[i].s == s {
			c.waiters[i].s = nil
		}
	}
	c.closeBulk(s)
	c.closeLists(s)
}

// Restart closes every session: their connections are gone with the
// process that held them. Everything handed to them and not known to have
// reached a socket counts as lost. Recovery runs it after replaying the
// log. Recorded (as the closes).
func (c *Core) Restart() {
	for _, id := range sortedKeys(c.sessions) {
		s := c.sessions[id]
		c.Close(s, s.buffered)
		s.out = nil
	}
	c.dirty = c.dirty[:0]
}

// markDirty queues s for the end-of-turn flush.
func (c *Core) markDirty(s *Session) {
	if !s.dirty {
		s.dirty = true
		c.dirty = append(c.dirty, s)
	}
}

// receiver returns r's record, creating it.
func (c *Core) receiver(id uint64) *receiver {
	slot := &c.recvCache[recvSlot(id)]
	if r := *slot; r != nil && r.id == id {
		return r
	}
	r := c.receivers[id]
	if r == nil {
		r = &receiver{id: id}
		c.addReceiver(r)
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
// backlog, no timers and no drop to report: no event of it can be pending
// or lost any more. Its sequence numbers start again at 1 if it is used
// again. While it has timers the record stays, so a connection loss leaves
// a visible seq gap; while it has drops to report, the next bind reports
// them. A receiver in acknowledged mode is retained instead, for
// ack_retention_ticks (see retain.go): timers added for it while it is
// unbound meanwhile keep that mode; once forgotten, a bind with ack moves
// its seq past any it gave before (bindMode).
func (c *Core) forgetIfIdle(r *receiver) {
	if !c.idleNow(r) {
		return
	}
	if r.acked {
		c.retain(r)
		return
	}
	c.forget(r)
}

// tidy forgets receiver id's record if it has become idle (after a cancel).
func (c *Core) tidy(id uint64) {
	if r := c.receivers[id]; r != nil {
		c.forgetIfIdle(r)
	}
}

// ReceiverState describes a receiver's record, for diagnostics and tests.
type ReceiverState struct {
	ID        uint64
	Backlog   int  // events held (in acknowledged mode: the outbox, sent and unsent)
	Timers    int  // live timers
	Bound     bool // bound by a session
	Ephemeral bool
	Acked     bool   // acknowledged mode
	Sent      int    // of Backlog, those handed to the owner and not yet acknowledged
	Parked    int    // firings waiting for room in the outbox
	Seq       uint64 // sequence number of the last event
}

// Receivers returns every receiver record, by id.
func (c *Core) Receivers() []ReceiverState {
	out := make([]ReceiverState, 0, len(c.receivers))
	for _, id := range sortedKeys(c.receivers) {
		r := c.receivers[id]
		out = append(out, ReceiverState{ID: id, Backlog: r.n, Timers: c.wheel.ReceiverLen(id), Bound: r.owner != nil, Ephemeral: r.ephemeral,
			Acked: r.acked, Sent: r.sent, Parked: r.parked.len(), Seq: r.seq})
	}
	return out
}
