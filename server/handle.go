package server

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"math"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Version is the server version reported in hello.
const Version = "0.1.0"

// handle applies one request frame of session s and appends its reply to
// s.out. A malformed frame gets an error reply and sets s.kill.
func (st *state) handle(s *session, payload []byte) {
	st.work++
	var req protocol.Request
	err := protocol.DecodeRequest(payload, &req)
	switch {
	case errors.Is(err, protocol.ErrUnknownOp):
		st.fail(s, req.ID, protocol.CodeUnknownOp, err.Error())
		return
	case err != nil:
		st.malformed(s, req.ID, err)
		return
	}
	if !s.hello && req.Op != protocol.OpHello {
		st.fail(s, req.ID, protocol.CodeHelloRequired, "the first request must be hello")
		return
	}
	if req.Op.Admin() && !s.admin {
		st.fail(s, req.ID, protocol.CodeUnauthorized, fmt.Sprintf("%s is an admin op: say hello with the admin token", req.Op))
		return
	}
	k := wheel.Key{Receiver: req.Receiver, Tid: req.Tid}
	switch req.Op {
	case protocol.OpHello:
		st.hello(s, &req)
	case protocol.OpBind:
		st.bind(s, &req)
	case protocol.OpUnbind:
		// Unbinding keeps the timers, even of an ephemeral bind: only a
		// closing session releases those.
		if _, ok := s.receivers[req.Receiver]; ok {
			delete(s.receivers, req.Receiver)
			r := st.receivers[req.Receiver]
			r.owner = nil
			st.forgetIfIdle(r)
			st.ok(s, req.ID)
		} else {
			st.fail(s, req.ID, protocol.CodeNotFound, fmt.Sprintf("receiver %d is not bound by this session", req.Receiver))
		}
	case protocol.OpAdd:
		st.add(s, &req)
	case protocol.OpCancel:
		if st.mayTouch(s, &req) {
			st.reply(s, req.ID, st.wheel.Cancel(k))
			st.tidy(req.Receiver)
		}
	case protocol.OpGet:
		in, err := st.wheel.Get(k)
		if err != nil {
			st.reply(s, req.ID, err)
			return
		}
		t := timerOf(&in)
		s.out = protocol.AppendTimerOK(s.out, req.ID, &t)
	case protocol.OpList:
		st.list(s, &req)
	case protocol.OpCancelAll:
		if st.mayTouch(s, &req) {
			n := st.wheel.CancelAll(req.Receiver)
			st.work += n
			s.out = protocol.AppendOK(s.out, req.ID, uint64(n))
			st.tidy(req.Receiver)
		}
	case protocol.OpPause:
		if st.mayTouch(s, &req) {
			st.reply(s, req.ID, st.wheel.Pause(k))
		}
	case protocol.OpResume:
		if st.mayTouch(s, &req) {
			st.reply(s, req.ID, st.wheel.Resume(k))
		}
	case protocol.OpPing:
		s.out = protocol.AppendOK(s.out, req.ID, st.now())
	case protocol.OpFastForward:
		st.fastForward(s, &req)
	case protocol.OpFreeze:
		st.clock.Freeze()
		st.speedChanged()
		s.out = protocol.AppendOK(s.out, req.ID, st.now())
	case protocol.OpResumeSync:
		st.clock.Resume()
		st.speedChanged()
		s.out = protocol.AppendOK(s.out, req.ID, st.now())
	case protocol.OpSetSpeed:
		if err := st.clock.SetSpeed(req.Speed); err != nil {
			st.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("speed %v: must be finite and in [%v, %v]", req.Speed, wheel.MinSpeed, wheel.MaxSpeed))
			return
		}
		st.speedChanged()
		s.out = protocol.AppendOK(s.out, req.ID, st.now())
	case protocol.OpStats:
		stats := st.stats()
		s.out = protocol.AppendStatsOK(s.out, req.ID, &stats)
	default:
		st.fail(s, req.ID, protocol.CodeInternal, fmt.Sprintf("op %s is not handled", req.Op))
	}
}

// hello authenticates session s. The admin token makes an admin session;
// the client token, or no token when the server requires none, a plain one.
// Any other token is unauthorized, and a failed hello leaves the session
// without a hello (so without admin rights): its next requests get
// hello_required until a hello succeeds; receivers it has bound stay bound.
// The maxHelloFailures-th failure on a connection, counted over its whole
// life (a success in between does not reset it), closes it after the reply.
// An unsupported version is not a failed authentication.
func (st *state) hello(s *session, req *protocol.Request) {
	if req.Version != protocol.Version {
		st.fail(s, req.ID, protocol.CodeUnsupportedVersion, fmt.Sprintf("protocol version %d is not supported; this server speaks %d", req.Version, protocol.Version))
		return
	}
	if len(req.Name) > st.cfg.Limits.MaxName {
		st.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_name (%d bytes) exceeded: the name has %d bytes", st.cfg.Limits.MaxName, len(req.Name)))
		return
	}
	isAdmin := st.cfg.AdminToken != "" && tokenEqual(req.Token, st.cfg.AdminToken)
	isClient := st.cfg.ClientToken != "" && tokenEqual(req.Token, st.cfg.ClientToken)
	if !isAdmin && !isClient && (req.Token != "" || st.cfg.ClientToken != "") {
		st.helloFailed(s, req)
		return
	}
	s.hello, s.admin, s.name = true, isAdmin, req.Name
	h := protocol.Hello{
		Session: s.id, Now: st.now(), TickNs: uint64(st.cfg.Tick.Nanoseconds()), ServerVersion: Version,
		Limits: st.cfg.wireLimits(),
	}
	s.out = protocol.AppendHelloOK(s.out, req.ID, &h)
	st.log.Debug("hello", "session", s.id, "name", req.Name, "admin", isAdmin)
}

// tokenEqual compares a presented token with a configured one in time that
// does not depend on where they differ.
func tokenEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// bind gives receiver req.Receiver to s, taking it over from another session,
// and delivers its backlog after the reply.
func (st *state) bind(s *session, req *protocol.Request) {
	id := req.Receiver
	if _, ok := s.receivers[id]; !ok && len(s.receivers) >= st.cfg.Limits.MaxReceiversPerSession {
		st.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_receivers_per_session (%d) reached", st.cfg.Limits.MaxReceiversPerSession))
		return
	}
	r := st.receiver(id)
	if old := r.owner; old != nil && old != s {
		delete(old.receivers, id)
		old.out = protocol.AppendTakeover(old.out, id, s.id)
		st.markDirty(old)
		st.rlog.Info("receiver taken over", "receiver", id, "from", old.id, "to", s.id)
	}
	r.owner, r.ephemeral = s, req.Ephemeral
	s.receivers[id] = req.Ephemeral
	dropped := r.dropped
	r.dropped = 0
	// The reply announces how many backlog events follow it; they go out
	// as the connection drains (outbox.go), before any newer event of r.
	s.out = protocol.AppendOK(s.out, req.ID, uint64(r.n), dropped)
	if r.n > 0 {
		st.hold(s, r)
		st.pump(s)
	}
}

// mayTouch enforces AddOnlyBound: with it, a session changes only the timers
// of receivers it has bound.
func (st *state) mayTouch(s *session, req *protocol.Request) bool {
	if !st.cfg.AddOnlyBound {
		return true
	}
	if _, ok := s.receivers[req.Receiver]; ok {
		return true
	}
	st.fail(s, req.ID, protocol.CodeUnauthorized, fmt.Sprintf("receiver %d is not bound by this session, and the server allows changes only to bound receivers (add_only_bound)", req.Receiver))
	return false
}

func (st *state) add(s *session, req *protocol.Request) {
	l := st.cfg.Limits
	switch {
	case !st.mayTouch(s, req):
		return
	case req.Repeat > math.MaxUint32:
		st.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("repeat %d exceeds 2^32-1", req.Repeat))
		return
	case len(req.Data) > l.MaxData:
		st.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_data (%d bytes) exceeded: data has %d bytes", l.MaxData, len(req.Data)))
		return
	}
	k := wheel.Key{Receiver: req.Receiver, Tid: req.Tid}
	if !st.dataFits(k, req) {
		st.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_data_total (%d bytes) reached: the timers hold %d bytes of data", l.MaxDataTotal, st.wheel.DataBytes()))
		return
	}
	if st.wheel.Len() >= l.MaxTimers || st.wheel.ReceiverLen(req.Receiver) >= l.MaxTimersPerReceiver {
		// At a limit only a replace of an existing timer, which keeps the
		// count as it is, goes through; a duplicate is still "exists".
		_, err := st.wheel.Get(k)
		switch {
		case err == nil && !req.Replace:
			st.reply(s, req.ID, wheel.ErrExists)
			return
		case err != nil && st.wheel.Len() >= l.MaxTimers:
			st.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_timers (%d) reached", l.MaxTimers))
			return
		case err != nil:
			st.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_timers_per_receiver (%d) reached for receiver %d", l.MaxTimersPerReceiver, req.Receiver))
			return
		}
	}
	spec := wheel.Spec{After: req.After, At: req.At, Every: req.Every, Repeat: uint32(req.Repeat), Data: req.Data, Replace: req.Replace}
	now := st.now()
	if now > st.wheel.Now() && !st.behind(s, req, &spec, now) {
		return
	}
	if err := st.wheel.Add(k, spec); err != nil {
		st.reply(s, req.ID, err)
		return
	}
	due := spec.At
	if due == 0 {
		due = now + req.After
	}
	s.out = protocol.AppendOK(s.out, req.ID, due)
}

// dataFits reports whether the data of add req fits in max_data_total,
// counting the data a replace would free.
func (st *state) dataFits(k wheel.Key, req *protocol.Request) bool {
	room := uint64(st.cfg.Limits.MaxDataTotal) - min(st.wheel.DataBytes(), uint64(st.cfg.Limits.MaxDataTotal))
	if uint64(len(req.Data)) <= room {
		return true
	}
	if !req.Replace {
		return false
	}
	old, err := st.wheel.Get(k)
	return err == nil && uint64(len(req.Data)) <= room+uint64(len(old.Data))
}

// behind rewrites spec to absolute ticks when the wheel trails tw-time, so
// that after and at count from tw-time (now), not from the wheel's position;
// it replies with the error and returns false for a spec invalid at now.
func (st *state) behind(s *session, req *protocol.Request, spec *wheel.Spec, now uint64) bool {
	first := req.At
	switch {
	case req.At != 0 && req.At <= now:
		st.reply(s, req.ID, wheel.ErrPast)
		return false
	case req.At == 0 && req.After == 0:
		st.reply(s, req.ID, wheel.ErrZeroAfter)
		return false
	case req.At == 0 && req.After > math.MaxUint64-now:
		st.reply(s, req.ID, wheel.ErrOverflow)
		return false
	case req.At == 0:
		first = now + req.After
	}
	if spec.Every == 0 {
		spec.Every = first - now // the first delay, as the wheel would take it
	}
	spec.At, spec.After = first, 0
	return true
}

// fastForward moves tw-time on by req.Ticks; the reply waits until every
// timer in between has fired, and s sends nothing else meanwhile.
func (st *state) fastForward(s *session, req *protocol.Request) {
	if err := st.startFastForward(req.Ticks, waiter{s: s, id: req.ID}); err != nil {
		st.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("fast-forward by %d ticks: tw-time would pass 2^64-1", req.Ticks))
		return
	}
}

// startFastForward moves tw-time on by ticks and runs the first advance
// turn; w (a session's request, or Server.FastForward's channel) is answered
// once the wheel has fired everything up to the new tw-time. Both the admin
// op and Server.FastForward go through here.
func (st *state) startFastForward(ticks uint64, w waiter) error {
	if err := st.clock.FastForward(ticks); err != nil {
		return err
	}
	st.clockChanged()
	w.target, w.fired = st.clock.Now(), st.firedTotal
	st.waiters = append(st.waiters, w)
	if w.s != nil {
		w.s.waiting = true // its next requests wait for the reply (answerWaiters)
	}
	st.more = st.advance()
	return nil
}

func (st *state) speedChanged() {
	st.clockChanged()
	if st.onSpeed != nil {
		st.onSpeed(st.clock.Speed(), st.clock.Frozen())
	}
}

func (st *state) stats() protocol.Stats {
	target := st.clock.Now()
	now := st.wheel.Now()
	sessions := 0 // connections that have said hello
	for _, s := range st.sessions {
		if s.hello {
			sessions++
		}
	}
	return protocol.Stats{
		Now: now, Target: target, Lag: target - now,
		Timers: uint64(st.wheel.Len()), Sessions: uint64(sessions), Connections: uint64(len(st.sessions)),
		Receivers: uint64(len(st.receivers)), BacklogEvents: st.backlogEvents,
		FiredTotal: st.firedTotal, DroppedTotal: st.droppedTotal,
		TickNs: uint64(st.cfg.Tick.Nanoseconds()), Speed: st.clock.Speed(), Frozen: st.clock.Frozen(),
	}
}

func timerOf(in *wheel.Info) protocol.Timer {
	return protocol.Timer{Receiver: in.Receiver, Tid: in.Tid, Due: in.Due, Remaining: in.Remaining, Every: in.Every,
		Fired: in.Fired, Repeat: uint64(in.Repeat), Paused: in.Paused, Data: in.Data}
}

// ok appends an empty OK reply.
func (st *state) ok(s *session, id uint64) { s.out = protocol.AppendOK(s.out, id) }

// reply appends OK for a nil err, or the error reply for a wheel error.
func (st *state) reply(s *session, id uint64, err error) {
	if err == nil {
		st.ok(s, id)
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
	st.fail(s, id, code, err.Error())
}

func (st *state) fail(s *session, id uint64, code protocol.Code, msg string) {
	s.out = protocol.AppendError(s.out, id, code, msg)
}

// malformed answers a frame that cannot be decoded and marks the connection
// for closing: after a framing error its byte stream cannot be trusted.
func (st *state) malformed(s *session, id uint64, err error) {
	st.fail(s, id, protocol.CodeMalformed, err.Error())
	s.kill = true
	st.rlog.Info("closing connection after a malformed frame", "session", s.id, "err", err)
}
