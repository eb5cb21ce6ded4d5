package session

import (
	"errors"
	"fmt"
	"math"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// add schedules a timer. After and at count from Now (tw-time), not from
// the wheel's position, which trails it while the wheel catches up.
func (c *Core) add(s *Session, req *protocol.Request) {
	l := &c.limits
	switch {
	case !c.mayTouch(s, req):
		return
	case req.Repeat > math.MaxUint32:
		c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("repeat %d exceeds 2^32-1", req.Repeat))
		return
	case len(req.Data) > l.MaxData:
		c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_data (%d bytes) exceeded: data has %d bytes", l.MaxData, len(req.Data)))
		return
	}
	k := wheel.Key{Receiver: req.Receiver, Tid: req.Tid}
	if !c.dataFits(k, req) {
		c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_data_total (%d bytes) reached: the timers hold %d bytes of data", l.MaxDataTotal, c.wheel.DataBytes()+c.parkedBytes))
		return
	}
	if live, mine := c.timerCounts(req.Receiver); live >= l.MaxTimers || mine >= l.MaxTimersPerReceiver {
		// At a limit only a replace of an existing timer, which keeps the
		// count as it is, goes through; a duplicate is still "exists".
		_, err := c.wheel.Get(k)
		switch {
		case err == nil && !req.Replace:
			c.reply(s, req.ID, wheel.ErrExists)
			return
		case err != nil && live >= l.MaxTimers:
			c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_timers (%d) reached", l.MaxTimers))
			return
		case err != nil:
			c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_timers_per_receiver (%d) reached for receiver %d", l.MaxTimersPerReceiver, req.Receiver))
			return
		}
	}
	spec := wheel.Spec{After: req.After, At: req.At, Every: req.Every, Repeat: uint32(req.Repeat), Data: req.Data, Replace: req.Replace}
	if req.AfterNs != 0 && req.At == 0 && req.Schedule == "" { // planAdd refuses after_ns with a schedule
		var ok bool
		if spec.After, spec.Every, ok = c.afterNs(s, req); !ok {
			return
		}
	}
	plan, ok := c.planAdd(s, req, &spec) // schedule.go
	if !ok {
		return
	}
	overdue := c.soonest(&spec)
	due, err := c.wheel.AddFrom(k, spec, c.Now())
	if err != nil {
		c.reply(s, req.ID, err)
		return
	}
	if overdue != 0 {
		if plan == nil {
			plan = &timerPlan{}
		}
		plan.overdue = overdue
	}
	c.setPlan(k, plan)
	c.unhold(k) // a replace makes a new timer: the server holds it no more
	if req.Group != 0 || c.groupsInUse() {
		c.groupAdded(k, req.Group) // bulk.go: its group; paused at once in a paused receiver or group
	}
	s.out = protocol.AppendOK(s.out, req.ID, due)
}

// soonest makes an add whose first firing is not in the future — after 0
// with no at, after_ns or schedule, or an at at or before tw-time now —
// due at the next tick, now+1, the soonest a timer can fire (the current
// tick's firings have run): as Redis and asynq run such items at once,
// rather than refusing them. It returns the ticks the timer was already
// overdue when added (now - at; 0 for after 0 and for at = now), which its
// first firing's late adds (timerPlan.overdue). Every 0 keeps meaning the
// first delay, now 1 tick. Other adds are left as they are.
func (c *Core) soonest(spec *wheel.Spec) (overdue uint64) {
	now := c.Now()
	switch {
	case spec.At != 0 && spec.At <= now:
		overdue = now - spec.At
	case spec.At == 0 && spec.After == 0:
		// (after_ns and schedules have set After or At by now: a zero
		// after_ns is no after_ns.)
	default:
		return 0
	}
	spec.At, spec.After = 0, 1
	return overdue
}

// timerCounts returns the timers counted against max_timers (live ones,
// and firings parked for room in an outbox, which were timers and are not
// delivered yet) and those of them of receiver r, for
// max_timers_per_receiver.
func (c *Core) timerCounts(r uint64) (live, mine int) {
	live, mine = c.wheel.Len(), c.wheel.ReceiverLen(r)
	if c.parkedTotal > 0 {
		live += int(c.parkedTotal)
		if rec := c.receivers[r]; rec != nil {
			mine += rec.parked.len()
		}
	}
	return live, mine
}

// dataFits reports whether the data of add req fits in max_data_total,
// counting the data a replace would free.
func (c *Core) dataFits(k wheel.Key, req *protocol.Request) bool {
	total := uint64(c.limits.MaxDataTotal)
	used := c.wheel.DataBytes() + c.parkedBytes
	room := total - min(used, total)
	if uint64(len(req.Data)) <= room {
		return true
	}
	if !req.Replace {
		return false
	}
	old, err := c.wheel.Get(k)
	return err == nil && uint64(len(req.Data)) <= room+uint64(len(old.Data))
}

// SetStatsHook sets a function that adds the server's own figures (a
// cluster node's raft state) to each stats reply, on the Core's goroutine.
// A stats reply is recorded by its length only, so the hook is not called
// by Replay.
func (c *Core) SetStatsHook(fn func(*protocol.Stats)) { c.statsHook = fn }

// SetClusterHook sets the function that takes an admin session's cluster
// op (a cluster node's; without a hook the op is answered bad_state), on
// the Core's goroutine. The hook refuses the request at once by returning
// an error code and message, or returns 0 and answers later, through
// Answer, once the membership change is done: the request changes nothing in the Core and
// is not recorded; its reply is recorded by its length only, so the hook
// is not called by Replay.
func (c *Core) SetClusterHook(fn func(s *Session, req protocol.Request) (protocol.Code, string)) {
	c.clusterHook = fn
}

// Answer appends reply, one whole frame the server made outside Apply (a
// cluster op's), to s's output, and reports whether s is still one of
// this Core's sessions (when it is not, nothing is done). It is recorded
// by its length, as every reply a replay does not reproduce.
func (c *Core) Answer(s *Session, reply []byte) bool {
	if c.sessions[s.id] != s || s.kill {
		return false
	}
	s.out = append(s.out, reply...)
	c.unreproduced(s, len(reply))
	c.markDirty(s)
	return true
}

// Stats returns the server's counters as the stats op reports them.
func (c *Core) Stats() protocol.Stats {
	now := c.wheel.Now()
	sessions := 0 // connections that have said hello
	for _, s := range c.sessions {
		if s.hello {
			sessions++
		}
	}
	return protocol.Stats{
		Now: now, Target: c.target, Lag: c.target - min(c.behind(), c.target),
		Timers: uint64(c.wheel.Len()), Sessions: uint64(sessions), Connections: uint64(len(c.sessions)),
		Receivers: uint64(len(c.receivers)), BacklogEvents: c.backlogEvents,
		OutboxEvents: c.outboxEvents, WaitingFirings: c.parkedTotal,
		FiredTotal: c.firedTotal, DroppedTotal: c.droppedTotal,
		ReceiverBytes: c.ReceiverBytes(), RetainedReceivers: uint64(c.idleN),
		TickNs: c.cfg.TickNs, Speed: c.speed, Frozen: c.frozen,
		RequestIDs: uint64(c.reqIDs.live), RequestIDBytes: c.reqIDs.bytes,
	}
}

// Counters are totals the server reports in its logs and metrics.
type Counters struct {
	Fired, Dropped, Lost, BacklogEvents, BacklogBytes uint64
	Parked                                            uint64 // firings waiting for room in an outbox
	Sessions, Receivers, Timers                       int
	// RetainedReceivers are, of Receivers, the idle ones in acknowledged
	// mode kept for ack_retention_ticks; ReceiverBytes estimates the memory
	// of all the records, apart from their events (see Core.ReceiverBytes).
	RetainedReceivers int
	ReceiverBytes     uint64
	// Retries counts retried changes answered from the memory of request
	// ids (requestid.go) since the Core was made: not state.
	Retries uint64
}

// Counters returns the Core's totals.
func (c *Core) Counters() Counters {
	return Counters{Fired: c.firedTotal, Dropped: c.droppedTotal, Lost: c.lostTotal,
		BacklogEvents: c.backlogEvents, BacklogBytes: c.backlogBytes, Parked: c.parkedTotal,
		Sessions: len(c.sessions), Receivers: len(c.receivers), Timers: c.wheel.Len(),
		RetainedReceivers: c.idleN, ReceiverBytes: c.ReceiverBytes(), Retries: c.reqIDs.hits}
}

func timerOf(in *wheel.Info) protocol.Timer {
	return protocol.Timer{Receiver: in.Receiver, Tid: in.Tid, Due: in.Due, Remaining: in.Remaining, Every: in.Every,
		Fired: in.Fired, Repeat: uint64(in.Repeat), Paused: in.Paused, Data: in.Data}
}

// ok appends an empty OK reply.
func (c *Core) ok(s *Session, id uint64) { s.out = protocol.AppendOK(s.out, id) }

// reply appends OK for a nil err, or the error reply for a wheel error.
func (c *Core) reply(s *Session, id uint64, err error) {
	if err == nil {
		c.ok(s, id)
		return
	}
	code := protocol.CodeInternal
	switch {
	case errors.Is(err, wheel.ErrNotFound):
		code = protocol.CodeNotFound
	case errors.Is(err, wheel.ErrExists):
		code = protocol.CodeExists
	case errors.Is(err, wheel.ErrZeroAfter), errors.Is(err, wheel.ErrPast), errors.Is(err, wheel.ErrOverflow):
		code = protocol.CodeInvalidArgument
	case errors.Is(err, wheel.ErrPaused), errors.Is(err, wheel.ErrNotPaused):
		code = protocol.CodeBadState
	case errors.Is(err, wheel.ErrFull):
		code = protocol.CodeLimitExceeded
	}
	msg := err.Error()
	if s.plain {
		msg = plainText(msg)
	}
	c.fail(s, id, code, msg)
}

// fail appends an error reply. The request it answers is refused: it must
// have changed nothing (see applyRecorded).
func (c *Core) fail(s *Session, id uint64, code protocol.Code, msg string) {
	c.refused = true
	c.countError(code)
	s.out = protocol.AppendError(s.out, id, code, msg)
}

// Malformed answers a frame that cannot be decoded (or cut from the byte
// stream) and marks the connection for closing: after a framing error its
// byte stream cannot be trusted. Recorded as the reply's length (a replay
// does not reproduce the text) and the kill.
func (c *Core) Malformed(s *Session, id uint64, err error) {
	before := len(s.out)
	c.fail(s, id, protocol.CodeMalformed, plainText(err.Error())) // recorded as its length: any wording replays
	c.killPad(s, len(s.out)-before)
	s.kill = true
	c.markDirty(s)
	c.peerInfo("closing connection after a malformed frame", "session", s.id, "err", err)
}

// Expire answers a connection whose timeout ran out with an error reply
// (code timeout, id 0) saying why, and marks it for closing. Recorded as
// Malformed is.
func (c *Core) Expire(s *Session, why string) {
	c.peerInfo("closing a connection: timeout", "session", s.id, "name", s.name, "why", why)
	before := len(s.out)
	s.out = protocol.AppendError(s.out, 0, protocol.CodeTimeout, plainText(why))
	c.countError(protocol.CodeTimeout)
	c.killPad(s, len(s.out)-before)
	s.kill = true
	c.markDirty(s)
}

// killPad records the kill of s and its last reply's length, unless s
// is quiet (quiet.go).
func (c *Core) killPad(s *Session, n int) {
	if !c.lazy(s) {
		c.rec.pad(inKill, s.id, n)
	}
	c.rec.marks++ // the reply is laid out here, not by Apply
}

// Work returns the work counter: requests handled and timers they walked.
func (c *Core) Work() int { return c.work }

func (c *Core) peerInfo(msg string, args ...any) {
	if !c.replaying {
		c.peer.Info(msg, args...)
	}
}

func (c *Core) peerWarn(msg string, args ...any) {
	if !c.replaying {
		c.peer.Warn(msg, args...)
	}
}
