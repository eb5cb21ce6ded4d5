package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The record of a turn is the sequence of the Core's state-changing inputs
// during it, each a kind byte followed by its fields as uvarints (a float
// as its 8 IEEE bits, bytes with their length first). Reads (get, list,
// ping, stats) and refused requests change nothing but a session's output,
// and are recorded only as the length of that output (inPad): where each
// event lies in a session's output stream decides, when its connection
// closes, whether it reached the socket, so a replay must lay the stream
// out the same. Malformed and Expire also mark the session killed. A quiet
// session's (quiet.go) are not recorded at all: its fields are recorded
// absolutely (inSync) before its next recorded input; and an advance that
// fires nothing is recorded only before the next input that is.
const (
	inOpen         = 1  // sid
	inClose        = 2  // sid, unsent
	inApply        = 3  // sid, payload
	inHello        = 4  // sid, request id, outcome, name, reply length (older logs: hello is synced now)
	inClock        = 5  // sid (0: none), request id, op, speed bits, ticks, target
	inAdvance      = 6  // target, max fires
	inBuffered     = 7  // sid, bytes
	inWritten      = 8  // sid, bytes
	inLimits       = 9  // the limits, in field order
	inSetClock     = 10 // speed bits, frozen
	inWall         = 11 // wall-clock Unix ns, tick
	inPad          = 12 // sid, bytes of output a replay does not reproduce
	inKill         = 13 // sid, bytes of output: as inPad, and the session is killed
	inPumpAll      = 14 // the end-of-turn top-up of stalled sessions ran
	inBlock        = 15 // sid: its output is full, its requests are not read
	inWrote        = 16 // sid, bytes its connection buffers after a write
	inAddOnlyBound = 17 // 0 or 1
	inLimitsN      = 18 // the number of limits, then the limits in field order
	inInstant      = 19 // tick, sub: where tw-time was inside the tick, for the add (after_ns) that follows
	inNextSession  = 33 // the last session id handed out (see Core.noteSessions)
	inFired        = 34 // firings: first in the record of a turn that fired, how many it fired (see RecordFirings)
	inCheck        = 35 // check id: the state here is hashed and compared across nodes (check.go); last in its record
	inSync         = 32 // (not 21: left for kinds added elsewhere) sid, flags, auth failures, name; with syncStream: written, out length, buffered, the dropped notice (see quiet.go)
)

// recorder collects the inputs of the current turn while on.
type recorder struct {
	on  bool
	buf []byte
	// marks counts the recorded inputs whose replay reproduces a request's
	// output (apply, hello, clock), so Apply knows when to record a pad.
	marks uint64
	// adv is an advance that fired nothing and answered no fast-forward,
	// not yet recorded (advPending): it is recorded, as the last such
	// advance stands for all of them, just before the next input that is
	// (see Core.Advance). A turn that only moved tw-time leaves no record.
	advPending bool
	advTarget  uint64
	advMax     int
	// padAt..padEnd is the last inPad recorded, of session padSid and
	// padN bytes, while it ends buf (padEnd 0: none); see pad.
	padAt, padEnd int
	padSid        uint64
	padN          int
	// firedAt is Core.firedTotal when the last record was taken (or
	// recording turned on): the firings since are the next record's
	// (inFired), which pre holds in front of buf.
	firedAt uint64
	pre     []byte
}

// begin reports whether recording is on and, when it is, first records the
// advance waiting to be (see adv): every input is recorded after it.
func (r *recorder) begin() bool {
	if !r.on {
		return false
	}
	if r.advPending {
		r.advPending = false
		r.buf = append(r.buf, inAdvance)
		r.uv(r.advTarget)
		r.uv(uint64(r.advMax))
	}
	return true
}

// deferAdvance notes an advance that moves tw-time only, to be recorded
// before the next recorded input (replacing one noted before: moving the
// wheel with nothing due on the way is the same in one step as in many).
func (r *recorder) deferAdvance(target uint64, maxFires int) {
	if r.on {
		r.advPending, r.advTarget, r.advMax = true, target, maxFires
	}
}

// raw records inputs already encoded (a sync made before the request it
// goes with: see applyRecorded).
func (r *recorder) raw(b []byte) {
	if len(b) > 0 && r.begin() {
		r.buf = append(r.buf, b...)
	}
}

func (r *recorder) uv(v uint64) { r.buf = binary.AppendUvarint(r.buf, v) }

func (r *recorder) open(sid uint64) {
	if r.begin() {
		r.buf = append(r.buf, inOpen)
		r.uv(sid)
	}
}

func (r *recorder) close(sid uint64, unsent int) {
	if r.begin() {
		r.buf = append(r.buf, inClose)
		r.uv(sid)
		r.uv(uint64(unsent))
	}
}

func (r *recorder) apply(sid uint64, payload []byte) {
	r.marks++
	if r.begin() {
		r.buf = append(r.buf, inApply)
		r.uv(sid)
		r.uv(uint64(len(payload)))
		r.buf = append(r.buf, payload...)
	}
}

func (r *recorder) clock(s *Session, id uint64, op ClockOp, speed float64, ticks, target uint64) {
	r.marks++
	if r.begin() {
		var sid uint64
		if s != nil {
			sid = s.id
		}
		r.buf = append(r.buf, inClock)
		r.uv(sid)
		r.uv(id)
		r.buf = append(r.buf, byte(op))
		r.buf = binary.LittleEndian.AppendUint64(r.buf, math.Float64bits(speed))
		r.uv(ticks)
		r.uv(target)
	}
}

func (r *recorder) advance(target uint64, maxFires int) {
	if r.begin() {
		r.buf = append(r.buf, inAdvance)
		r.uv(target)
		r.uv(uint64(maxFires))
	}
}

func (r *recorder) buffered(sid uint64, n int) {
	if r.begin() {
		r.buf = append(r.buf, inBuffered)
		r.uv(sid)
		r.uv(uint64(n))
	}
}

func (r *recorder) written(sid uint64, n int) {
	if r.begin() {
		r.buf = append(r.buf, inWritten)
		r.uv(sid)
		r.uv(uint64(n))
	}
}

func (r *recorder) setClock(speed float64, frozen bool) {
	if r.begin() {
		r.buf = append(r.buf, inSetClock)
		r.buf = binary.LittleEndian.AppendUint64(r.buf, math.Float64bits(speed))
		r.buf = append(r.buf, b2u(frozen))
	}
}

// pad records n bytes of sid's output that a replay does not reproduce
// (inPad), or those and the session's kill (inKill). A pad that directly
// follows a pad of the same session (nothing recorded in between) is
// merged into it, since two pads replay as one of their sum: a bound
// session flooding refused requests costs a few bytes of record a turn,
// not a few a request (a red-team pass measured 24.8 MB in 14 s).
func (r *recorder) pad(kind byte, sid uint64, n int) {
	if !(n > 0 || kind == inKill) || !r.on {
		return
	}
	if kind == inPad && !r.advPending && r.padEnd > 0 && r.padEnd == len(r.buf) && r.padSid == sid {
		n += r.padN
		r.buf = r.buf[:r.padAt]
	} else if !r.begin() {
		return
	}
	at := len(r.buf)
	r.buf = append(r.buf, kind)
	r.uv(sid)
	r.uv(uint64(n))
	r.padEnd = 0
	if kind == inPad {
		r.padAt, r.padEnd, r.padSid, r.padN = at, len(r.buf), sid, n
	}
}

func (r *recorder) flag(k byte, on bool) {
	if r.begin() {
		r.buf = append(r.buf, k, b2u(on))
	}
}

func (r *recorder) kind(k byte) {
	if r.begin() {
		r.buf = append(r.buf, k)
	}
}

func (r *recorder) session(k byte, sid uint64) {
	if r.begin() {
		r.buf = append(r.buf, k)
		r.uv(sid)
	}
}

func (r *recorder) sessionN(k byte, sid uint64, n int) {
	if r.begin() {
		r.buf = append(r.buf, k)
		r.uv(sid)
		r.uv(uint64(n))
	}
}

func (r *recorder) wall(ns, tick uint64) {
	if r.begin() {
		r.buf = append(r.buf, inWall)
		r.uv(ns)
		r.uv(tick)
	}
}

func (r *recorder) instant(tick, sub uint64) {
	if r.begin() {
		r.buf = append(r.buf, inInstant)
		r.uv(tick)
		r.uv(sub)
	}
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func (r *recorder) limits(l *Limits) {
	if r.begin() {
		fields := limitFields(l)
		r.buf = append(r.buf, inLimitsN)
		r.uv(uint64(len(fields)))
		for _, v := range fields {
			r.uv(uint64(*v))
		}
	}
}

// limitFields lists the limits in their recorded order. New limits go at
// the end: a record or snapshot written before them holds the first
// legacyLimits, and the others take their defaults.
func limitFields(l *Limits) []*int {
	return []*int{&l.MaxFrame, &l.MaxData, &l.MaxDataTotal, &l.MaxTimersPerReceiver, &l.MaxTimers,
		&l.MaxReceiversPerSession, &l.MaxBacklog, &l.MaxBacklogBytes, &l.MaxBacklogTotal, &l.MaxBacklogBytesTotal,
		&l.MaxOutbound, &l.MaxInbound, &l.MaxConnections, &l.MaxName, &l.MaxListPage, &l.MaxListBytes,
		&l.MaxOutbox, &l.MaxOutboxBytes, &l.MaxOutboxTotal, &l.MaxOutboxBytesTotal, &l.MaxReceivers, &l.AckRetentionTicks,
		&l.MaxOutboundTotal, &l.MaxBulkPerTurn, &l.MaxRequestIDs, &l.RequestIDTicks}
}

// legacyLimits is the number of limits in inLimits records and version 1
// snapshots.
const legacyLimits = 16

// readLimits reads n limits in field order (more than this version knows
// are skipped, fewer leave the others 0: their defaults).
func readLimits(d *decoder, l *Limits, n int) {
	fields := limitFields(l)
	for i := range n {
		v := int(d.uv())
		if i < len(fields) {
			*fields[i] = v
		}
	}
}

// Record turns recording of inputs on or off (it is off in a new Core).
// The firings before it is turned on (a replay's) are no record's.
func (c *Core) Record(on bool) {
	c.rec.on = on
	c.rec.firedAt = c.firedTotal
}

// RecordFirings returns how many timers the turn whose record rec is fired
// (0 for a record without inFired: a turn that fired nothing, or one
// written before it was recorded). Replaying rec fires them again: the
// server counts them as the record's replay cost (snapshot.every_firings,
// the recovery's ETA) without replaying it.
func RecordFirings(rec []byte) uint64 {
	if len(rec) < 2 || rec[0] != inFired {
		return 0
	}
	n, k := binary.Uvarint(rec[1:])
	if k <= 0 {
		return 0
	}
	return n
}

// Recording reports whether this turn's record holds an input yet (an
// advance that only moved tw-time is deferred: it does not count).
func (c *Core) Recording() bool { return len(c.rec.buf) > 0 }

// TakeRecord returns the inputs recorded since the last call, or nil when
// there were none, and whether any of them was a client's request with a
// reply (with fsync always, the server makes the record durable before
// that reply leaves). A record of inputs that fired timers begins with
// how many (inFired, RecordFirings). The slice is valid until the next
// input. The
// sessions with such replies stay noted until HoldReplied or the next
// TakeRecord.
func (c *Core) TakeRecord() (rec []byte, replies bool) {
	for _, s := range c.replied {
		s.replied = false
	}
	replies = len(c.replied) > 0
	c.taken, c.replied = append(c.taken[:0], c.replied...), c.replied[:0]
	if len(c.rec.buf) > 0 {
		c.noteSessions()
	}
	fired := c.firedTotal - c.rec.firedAt
	c.rec.firedAt = c.firedTotal
	if len(c.rec.buf) == 0 {
		return nil, replies
	}
	b := c.rec.buf
	c.rec.buf, c.rec.padEnd = c.rec.buf[:0], 0
	if fired > 0 { // (a firing is always under a recorded advance: b is not empty)
		c.rec.pre = binary.AppendUvarint(append(c.rec.pre[:0], inFired), fired)
		c.rec.pre = append(c.rec.pre, b...)
		b = c.rec.pre
	}
	return b, replies
}

// noteReplied notes that s has output that needs this turn's record (a
// reply to a change, an event that fired), starting at byte at of s.out.
// Hello and bind replies are not noted: they promise nothing the log must
// hold (a restart closes every session, and clients hello and bind again),
// so they leave even while the log cannot be written (issue 24, item 4).
func (c *Core) noteReplied(s *Session, at int) {
	if s != nil && c.rec.on && !s.replied {
		s.replied = true
		s.replyAt = at
		c.replied = append(c.replied, s)
	}
}

// outLen is the length of s's pending output (0 for no session).
func outLen(s *Session) int {
	if s == nil {
		return 0
	}
	return len(s.out)
}

// HoldReplied keeps back the output of the sessions with replies to the
// inputs of the record last taken (call it after TakeRecord, before
// Flush): the server could not write that record to the log, and a reply
// must not promise a change the log does not have. Their output leaves
// with ReleaseHeld, once the log is written. Other sessions' output, and
// their firings, go on.
func (c *Core) HoldReplied() {
	for _, s := range c.taken {
		if !s.held && !s.closed {
			s.held = true
			s.holdFrom = s.replyAt // the output before it may leave
			c.held = append(c.held, s)
		}
	}
}

// ReleaseHeld lets the held sessions' output go at the next Flush.
func (c *Core) ReleaseHeld() {
	for _, s := range c.held {
		s.held = false
		s.marks = s.marks[:0]
		if len(s.out) > 0 {
			c.markDirty(s)
		}
	}
	clear(c.held)
	c.held = c.held[:0]
}

// holdMark is where a held session's output that needs turn's record
// begins: from counts the session's output bytes from its first
// (Session.written plus the index in out), so it stays put while the
// output before it leaves.
type holdMark struct{ turn, from uint64 }

// HoldTurn is HoldReplied for a log whose records become durable one turn
// at a time, in turn order, while later turns run (a cluster's replicated
// log): turn numbers the record last taken (increasing from call to call).
// The output of the sessions with replies to its inputs is kept back from
// where those replies begin; ReleaseTurns(turn), once the record is
// durable, lets it go, up to where the output that waits for a later turn
// begins. A session's output between two such places needs no record (a
// hello's reply, an event) and leaves with the earlier turn's.
func (c *Core) HoldTurn(turn uint64) {
	for _, s := range c.taken {
		if s.closed {
			continue
		}
		if !s.held {
			s.held = true
			c.held = append(c.held, s)
		}
		if n := len(s.marks); n == 0 || s.marks[n-1].turn != turn {
			s.marks = append(s.marks, holdMark{turn: turn, from: s.written + uint64(s.replyAt)})
		}
	}
}

// ReleaseTurns lets go, at the next Flush, the output held by HoldTurn for
// the turns up to turn, whose records are now durable. A session waiting
// for no later turn is no longer held.
func (c *Core) ReleaseTurns(turn uint64) {
	kept := c.held[:0]
	for _, s := range c.held {
		i := 0
		for i < len(s.marks) && s.marks[i].turn <= turn {
			i++
		}
		if i > 0 && len(s.out) > 0 {
			c.markDirty(s)
		}
		if i == len(s.marks) {
			s.held = false
			s.marks = s.marks[:0]
			continue
		}
		s.marks = s.marks[:copy(s.marks, s.marks[i:])]
		kept = append(kept, s)
	}
	clear(c.held[len(kept):])
	c.held = kept
}

// holdLimit is how much of held session s's output may leave now.
func (s *Session) holdLimit() int {
	if len(s.marks) == 0 {
		return min(s.holdFrom, len(s.out))
	}
	from := s.marks[0].from
	if from <= s.written {
		return 0
	}
	return int(min(from-s.written, uint64(len(s.out))))
}

// Held returns the number of sessions whose output waits for the log.
func (c *Core) Held() int { return len(c.held) }

// ErrReplay wraps every error of Replay: the record does not fit the state
// (a record of another state, or a bug: replay must agree with the run
// that recorded it).
var ErrReplay = errors.New("session: replay")

// Replay applies a recorded turn's inputs. Outputs are discarded.
func (c *Core) Replay(rec []byte) (err error) {
	c.replaying = true
	on := c.rec.on
	c.rec.on = false
	defer func() {
		c.replaying = false
		c.rec.on = on
		for _, s := range c.dirty {
			s.dirty = false
		}
		c.dirty = c.dirty[:0]
	}()
	d := decoder{b: rec}
	for len(d.b) > 0 && d.err == nil {
		off := len(rec) - len(d.b)
		kind := d.byte()
		if err := c.replayOne(kind, &d); err != nil {
			return fmt.Errorf("%w: input %d at byte %d: %v", ErrReplay, kind, off, err)
		}
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrReplay, d.err)
	}
	return nil
}

// replayOne applies one recorded input of the given kind.
func (c *Core) replayOne(kind byte, d *decoder) error {
	switch kind {
	case inOpen:
		if sid := d.uv(); d.err == nil {
			return c.openID(sid)
		}
	case inClose:
		s, unsent := d.session(c), int(d.uv())
		if d.err == nil {
			c.Close(s, unsent)
		}
	case inApply:
		s, payload := d.session(c), d.bytes()
		if d.err == nil {
			c.Apply(s, payload)
		}
	case inHello:
		s, id, outcome, name, n := d.session(c), d.uv(), d.byte(), string(d.bytes()), d.uv()
		if d.err == nil && n > 1<<20 {
			d.fail(fmt.Errorf("hello reply of %d bytes", n))
		}
		if d.err == nil {
			c.helloOutcome(s, id, name, outcome, int(n))
		}
	case inClock:
		return c.replayClock(d)
	case inAdvance:
		target, maxFires := d.uv(), int(d.uv())
		if d.err == nil {
			c.Advance(target, maxFires)
		}
	case inLimits, inLimitsN:
		var l Limits
		n := legacyLimits
		if kind == inLimitsN {
			n = d.count()
		}
		readLimits(d, &l, n)
		if d.err == nil {
			c.SetLimits(l)
		}
	case inSetClock:
		speed, frozen := math.Float64frombits(d.u64()), d.byte()
		if d.err == nil {
			c.SetClock(speed, frozen != 0)
		}
	case inAddOnlyBound:
		if on := d.byte(); d.err == nil {
			c.SetAddOnlyBound(on != 0)
		}
	case inWall:
		ns, tick := d.uv(), d.uv()
		if d.err == nil {
			c.SetWall(ns, tick)
		}
	case inInstant:
		c.instTick, c.instSub = d.uv(), d.uv()
	case inFired:
		d.uv() // what the inputs after it fire again; for the server's accounting only
	case inCheck:
		if id := d.uv(); d.err == nil {
			c.check, c.checkMarked = id, true
		}
	case inSync:
		return c.replaySync(d) // quiet.go
	case inNextSession:
		if n := d.uv(); d.err == nil {
			c.nextSession = max(c.nextSession, n)
		}
	default:
		return c.replayFlow(kind, d)
	}
	return d.err
}

// replayFlow applies one recorded input of a session's output stream: what
// it was sent that a replay does not reproduce, and what its socket took.
func (c *Core) replayFlow(kind byte, d *decoder) error {
	switch kind {
	case inPad, inKill:
		s, n := d.session(c), d.uv()
		if d.err == nil && n > 1<<30 {
			d.fail(fmt.Errorf("pad of %d bytes", n))
		}
		if d.err == nil {
			s.out = append(s.out, make([]byte, n)...)
			s.kill = s.kill || kind == inKill
		}
	case inBuffered:
		s, n := d.session(c), int(d.uv())
		if d.err == nil {
			c.Buffered(s, n)
		}
	case inWritten:
		return c.replayWritten(d)
	case inPumpAll:
		c.PumpAll(nil)
	case inBlock:
		if s := d.session(c); d.err == nil {
			c.block(s)
		}
	case inWrote:
		s, n := d.session(c), int(d.uv())
		if d.err == nil {
			c.wrote(s, n)
		}
	default:
		return c.replayMore(kind, d) // schedule.go
	}
	return d.err
}

func (c *Core) replayClock(d *decoder) error {
	sid, id, op := d.uv(), d.uv(), ClockOp(d.byte())
	speed := math.Float64frombits(d.u64())
	ticks, target := d.uv(), d.uv()
	if d.err != nil {
		return d.err
	}
	var s *Session
	if sid != 0 {
		if s = c.sessions[sid]; s == nil {
			return fmt.Errorf("no session %d", sid)
		}
	}
	if op == ClockFastForward {
		_, err := c.fastForward(waiter{s: s, id: id}, ticks, target, true)
		return err
	}
	if op < ClockFreeze || op > ClockSetSpeed {
		return fmt.Errorf("unknown clock op %d", op)
	}
	c.clockOp(s, id, op, speed, target, true)
	return nil
}

// replayWritten replays a flush of a session's output: the output the
// replay produced must be exactly as long as the one written.
func (c *Core) replayWritten(d *decoder) error {
	s, n := d.session(c), int(d.uv())
	if d.err != nil {
		return d.err
	}
	if n > len(s.out) {
		return fmt.Errorf("session %d wrote %d bytes, the replay has %d", s.id, n, len(s.out))
	}
	c.sent(s, n)
	return nil
}

// sent drops the first n bytes of s's output, handed to its connection:
// all of it, or the part before output held for the log (Flush). A
// dropped notice that left is no longer extended.
func (c *Core) sent(s *Session, n int) {
	if n == len(s.out) {
		s.out = s.out[:0]
		s.noteEnd = 0
	} else {
		s.out = s.out[:copy(s.out, s.out[n:])]
		if s.noteEnd > 0 && s.noteStart >= n {
			s.noteStart, s.noteEnd = s.noteStart-n, s.noteEnd-n
		} else {
			s.noteEnd = 0
		}
	}
	s.written += uint64(n)
}

// decoder reads recorded fields; the first error sticks.
type decoder struct {
	b   []byte
	err error
	// version is a snapshot's format version, for the fields it has.
	version byte
}

var errShort = errors.New("record truncated")

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uv()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// session reads a session id and returns that open session.
func (d *decoder) session(c *Core) *Session {
	sid := d.uv()
	if d.err != nil {
		return nil
	}
	s := c.sessions[sid]
	if s == nil {
		d.fail(fmt.Errorf("no open session %d", sid))
	}
	return s
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}
