package session

import (
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// maxHelloFailures is how many failed hellos close a connection.
const maxHelloFailures = 3

// Apply applies one request frame (its payload, header excluded) of
// session s at the current tw-time (Now) and appends its reply to s's
// output. A malformed frame gets an error reply and marks s killed. The
// checks come in this order: the message must decode (else malformed, and
// the connection closes), then a session without hello may send only hello
// (else hello_required, for an undefined op too), then the op must be
// defined (else unknown_op), then admin rights and the read-only state.
// Requests that change state are recorded: clock ops with the tick they
// left tw-time at, the others as sent. A request that changes nothing —
// a read, a refusal, anything before a successful hello, hello itself
// (which changes only its session's own fields: see quiet.go) — is not;
// its reply is recorded as its length only while the session is not
// quiet.
func (c *Core) Apply(s *Session, payload []byte) {
	c.work++
	before, mark := len(s.out), c.rec.marks
	defer func() {
		if c.rec.marks == mark { // nothing recorded reproduces the output
			c.unreproduced(s, len(s.out)-before)
		}
	}()
	req := &c.req
	*req = protocol.Request{}
	err := protocol.DecodeRequest(payload, req)
	switch {
	case errors.Is(err, protocol.ErrUnknownOp) && !s.hello:
		c.fail(s, req.ID, protocol.CodeHelloRequired, "the first request must be hello")
		c.markDirty(s)
		return
	case errors.Is(err, protocol.ErrUnknownOp):
		c.fail(s, req.ID, protocol.CodeUnknownOp, plainText(err.Error())) // recorded as a pad: any wording replays
		c.markDirty(s)
		return
	case err != nil:
		c.Malformed(s, req.ID, err)
		return
	}
	c.countRequest(req.Op)
	if why := c.refuse(s, req.Op); why != 0 {
		c.markDirty(s)
		return
	}
	wasQuiet := s.quiet()
	switch {
	case recordedAsSent(req.Op):
		c.applyRecorded(s, req, payload)
	case clockOp(req.Op): // recorded with its outcome, by dispatch
		c.syncSession(s) // quiet.go
		c.dispatch(s, req)
	default:
		c.dispatch(s, req)
	}
	if c.readsWait && !s.replied && showsState(req.Op) {
		c.noteReplied(s, before) // behind the changes in flight (SetReadsWait)
	}
	c.unquiet(s, wasQuiet)
	if len(s.out) > 0 {
		c.markDirty(s)
	}
}

// applyRecorded applies a request recorded as sent, and records it unless
// it was refused (an error reply, and nothing changed): then only its
// reply's length is, by Apply. The record of the session's own fields, if
// it is behind on them (quiet.go), comes first, as they were before.
func (c *Core) applyRecorded(s *Session, req *protocol.Request, payload []byte) {
	instant := req.Op == protocol.OpAdd && req.AfterNs != 0 && req.At == 0
	if instant {
		c.readInstant()
	}
	var sync []byte
	if s.stale && c.rec.on {
		sync = appendSync(c.syncBuf[:0], s)
		c.syncBuf = sync
	}
	c.refused = false
	at := len(s.out) // where this request's reply begins (noteReplied)
	// A retry of a change with a request id (requestid.go), unless the
	// Core remembers none (max_request_ids -1), is answered; or, of a bulk
	// operation in progress, adopted: a change, recorded (a replay adopts
	// it too).
	remember := req.Client != 0 && c.remembers() && changesTimers(req.Op)
	answer := retryApply
	if remember {
		answer = c.retried(s, req, payload)
	}
	switch answer {
	case retryAnswered:
		c.noteReplied(s, at) // behind the first one's record, if it is in flight
		return
	case retryApply:
		c.dispatch(s, req)
		if c.refused {
			return
		}
		if remember {
			c.rememberReply(s, req, payload, at)
		}
	}
	c.logOpen(s)
	if sync != nil {
		c.rec.raw(sync)
		s.stale = false
	}
	if instant {
		c.rec.instant(c.instTick, c.instSub)
	}
	c.rec.apply(s.id, payload)
	if req.Op != protocol.OpBind { // a bind's reply needs no record (noteReplied)
		c.noteReplied(s, at)
	}
}

// refuse answers a request s may not make now, returning its error code;
// 0 lets it through.
func (c *Core) refuse(s *Session, op protocol.Op) protocol.Code {
	id := c.req.ID
	switch {
	case !s.hello && op != protocol.OpHello:
		c.fail(s, id, protocol.CodeHelloRequired, "the first request must be hello")
		return protocol.CodeHelloRequired
	case op.Admin() && !s.admin:
		c.fail(s, id, protocol.CodeUnauthorized, fmt.Sprintf("%s is an admin op: say hello with the admin token", op))
		return protocol.CodeUnauthorized
	case changesTimers(op) && c.readOnly != "":
		c.fail(s, id, protocol.CodeUnavailable, plainText(c.readOnly)) // recorded as a pad
		return protocol.CodeUnavailable
	}
	return 0
}

// changesTimers reports whether op changes timers, which a read-only Core
// refuses.
func changesTimers(op protocol.Op) bool {
	switch op {
	case protocol.OpAdd, protocol.OpCancel, protocol.OpCancelAll, protocol.OpPause, protocol.OpResume,
		protocol.OpPauseAll, protocol.OpResumeAll, protocol.OpCancelGroup:
		return true
	}
	return false
}

// showsState reports whether a reply to op may show timer state: a read,
// or a change refused because of the state (SetReadsWait).
func showsState(op protocol.Op) bool {
	switch op {
	case protocol.OpGet, protocol.OpList, protocol.OpListGroup, protocol.OpStats:
		return true
	}
	return changesTimers(op)
}

// clockOp reports whether op changes tw-time's clock.
func clockOp(op protocol.Op) bool {
	switch op {
	case protocol.OpFastForward, protocol.OpFreeze, protocol.OpResumeSync, protocol.OpSetSpeed:
		return true
	}
	return false
}

// recordedAsSent reports whether a request of op is recorded as its
// payload: those that may change state, except hello and the clock ops,
// recorded with their outcome.
func recordedAsSent(op protocol.Op) bool {
	return changesTimers(op) || op == protocol.OpBind || op == protocol.OpUnbind || op == protocol.OpAck
}

// dispatch applies a decoded request that passed the session checks.
func (c *Core) dispatch(s *Session, req *protocol.Request) {
	k := wheel.Key{Receiver: req.Receiver, Tid: req.Tid}
	switch req.Op {
	case protocol.OpHello:
		c.hello(s, req)
	case protocol.OpBind:
		c.bind(s, req)
	case protocol.OpUnbind:
		c.unbind(s, req)
	case protocol.OpAdd:
		c.add(s, req)
	case protocol.OpAck:
		c.ack(s, req)
	case protocol.OpCancel:
		if c.mayTouch(s, req) {
			c.unhold(k)
			err := c.wheel.Cancel(k)
			c.reply(s, req.ID, err)
			if err == nil { // (not found: nothing to forget)
				c.dropPlan(k)
				c.forgetGroup(k)
				c.tidy(req.Receiver)
			}
		}
	case protocol.OpGet:
		in, err := c.wheel.Get(k)
		if err != nil {
			c.reply(s, req.ID, err)
			return
		}
		t := timerOf(&in)
		c.describePlan(&t)
		c.describeGroup(&t)
		s.out = protocol.AppendTimerOK(s.out, req.ID, &t)
	case protocol.OpList:
		c.list(s, req)
	case protocol.OpCancelAll, protocol.OpPauseAll, protocol.OpResumeAll, protocol.OpCancelGroup:
		c.startBulk(s, req) // bulk.go
	case protocol.OpListGroup:
		c.listGroup(s, req)
	case protocol.OpPause:
		if c.mayTouch(s, req) {
			if c.unhold(k) { // paused by the server for a parked firing: now the user's pause
				c.ok(s, req.ID)
				return
			}
			c.reply(s, req.ID, c.wheel.Pause(k))
		}
	case protocol.OpResume:
		if c.mayTouch(s, req) {
			held := c.unhold(k)
			err := c.wheel.Resume(k)
			if err == nil {
				c.planResumed(k)
			}
			c.reply(s, req.ID, err)
			c.refused = c.refused && !held // the server's hold ended all the same
		}
	case protocol.OpPing:
		s.out = protocol.AppendOK(s.out, req.ID, c.Now())
	case protocol.OpFastForward:
		if _, err := c.fastForward(waiter{s: s, id: req.ID}, req.Ticks, 0, false); err != nil {
			c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("fast-forward by %d ticks from tick %d: tw-time may reach "+
				"at most 2^64-2^62 (%d), so that timers can still be added after it", req.Ticks, c.Now(), uint64(MaxFastForwardTick)))
		}
	case protocol.OpFreeze:
		c.clockOp(s, req.ID, ClockFreeze, 0, 0, false)
	case protocol.OpResumeSync:
		c.clockOp(s, req.ID, ClockResume, 0, 0, false)
	case protocol.OpSetSpeed:
		if !(req.Speed >= wheel.MinSpeed && req.Speed <= wheel.MaxSpeed) {
			c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("speed %v: must be finite and in [%v, %v]", req.Speed, wheel.MinSpeed, wheel.MaxSpeed))
			return
		}
		c.clockOp(s, req.ID, ClockSetSpeed, req.Speed, 0, false)
	case protocol.OpStats:
		stats := c.Stats()
		if c.statsHook != nil {
			c.statsHook(&stats)
		}
		s.out = protocol.AppendStatsOK(s.out, req.ID, &stats)
	case protocol.OpCluster:
		if c.clusterHook == nil {
			c.fail(s, req.ID, protocol.CodeBadState, "this server is not a cluster node (it runs without cluster.id)")
			return
		}
		if code, msg := c.clusterHook(s, *req); code != 0 {
			c.fail(s, req.ID, code, msg)
		}
	default:
		c.fail(s, req.ID, protocol.CodeInternal, fmt.Sprintf("op %s is not handled", req.Op))
	}
}

// hello outcomes, as recorded.
const (
	helloFailed uint8 = iota
	helloClient
	helloAdmin
)

// helloPlain, or'ed into a recorded hello outcome, says the session's
// error replies are plain (Session.plain). Hellos recorded before it
// existed lack it: their sessions replay with the older wording.
const helloPlain uint8 = 0x80

// hello authenticates session s. The admin token makes an admin session;
// the client token, or no token when the server requires none, a plain one.
// Any other token is unauthorized, and a failed hello leaves the session
// without a hello (so without admin rights): its next requests get
// hello_required until a hello succeeds; receivers it has bound stay bound.
// The maxHelloFailures-th failure on a connection, counted over its whole
// life (a success in between does not reset it), closes it after the reply.
// An unsupported version is not a failed authentication.
func (c *Core) hello(s *Session, req *protocol.Request) {
	if req.Version != protocol.Version {
		c.fail(s, req.ID, protocol.CodeUnsupportedVersion, fmt.Sprintf("protocol version %d is not supported; this server speaks %d", req.Version, protocol.Version))
		return
	}
	if len(req.Name) > c.limits.MaxName {
		c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_name (%d bytes) exceeded: the name has %d bytes", c.limits.MaxName, len(req.Name)))
		return
	}
	isAdmin := c.cfg.AdminToken != "" && tokenEqual(req.Token, c.cfg.AdminToken)
	isClient := c.cfg.ClientToken != "" && tokenEqual(req.Token, c.cfg.ClientToken)
	outcome := helloClient
	switch {
	case isAdmin:
		outcome = helloAdmin
	case !isClient && (req.Token != "" || c.cfg.ClientToken != ""):
		outcome = helloFailed
	}
	c.helloOutcome(s, req.ID, req.Name, outcome|helloPlain, -1)
	if outcome != helloFailed {
		c.logOpen(s) // its reply tells the session its id
	}
	if c.rec.on {
		s.stale = true // the record learns the session's new fields before its next change (quiet.go)
	}
}

// helloOutcome applies a hello whose token check gave outcome. Its reply
// holds the server's configuration (version, tick, limits), which is not
// state: a replay passes the reply's recorded length as replyLen and gets
// that many bytes of padding instead (-1: the real reply).
func (c *Core) helloOutcome(s *Session, id uint64, name string, outcome uint8, replyLen int) {
	s.plain = outcome&helloPlain != 0
	outcome &^= helloPlain
	if outcome == helloFailed {
		c.helloFailed(s, id, name)
		return
	}
	s.hello, s.admin, s.name = true, outcome == helloAdmin, name
	if replyLen >= 0 {
		s.out = append(s.out, make([]byte, replyLen)...)
		return
	}
	h := protocol.Hello{
		Session: s.id, Now: c.Now(), TickNs: c.cfg.TickNs, ServerVersion: c.cfg.ServerVersion,
		Limits: c.cfg.Wire,
	}
	s.out = protocol.AppendHelloOK(s.out, id, &h)
	c.log.Debug("hello", "session", s.id, "name", name, "admin", s.admin)
}

// helloFailed answers a hello whose token is wrong (or missing where a
// client token is required): unauthorized, and the session is back to
// "hello required" with no admin rights. The maxHelloFailures-th failure on
// the connection also closes it after the reply. Failures are logged
// through the peer log, without the token.
func (c *Core) helloFailed(s *Session, id uint64, name string) {
	s.hello, s.admin = false, false
	s.authFailures++
	msg := "bad or missing token: say hello with the client token, or the admin token"
	if s.authFailures >= maxHelloFailures {
		msg = fmt.Sprintf("bad or missing token: %d failed hellos, closing the connection", s.authFailures)
	}
	c.fail(s, id, protocol.CodeUnauthorized, msg)
	if len(name) > 64 {
		name = name[:64]
	}
	args := []any{"session", s.id, "remote", s.Remote, "name", name, "failures", s.authFailures}
	if s.authFailures < maxHelloFailures {
		c.peerWarn("hello with a bad token", args...)
		return
	}
	s.kill = true
	c.markDirty(s)
	c.peerWarn("closing a connection after repeated hellos with a bad token", args...)
}

// tokenEqual compares a presented token with a configured one in time that
// does not depend on where they differ.
func tokenEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// bind gives receiver req.Receiver to s, taking it over from another
// session, and delivers its backlog after the reply: [pending, dropped,
// first_seq], first_seq being the sequence number of the first event that
// follows (in acknowledged mode the outbox is delivered again from its
// first event, whether or not it was sent before; so is it when a bind
// without ack ends acknowledged mode). A bind with ack
// of a receiver with nothing pending moves its sequence numbers on to at
// least the server's count of firings, so that a receiver the server
// forgot and made again never repeats a number it used (its count would
// otherwise start again at 1, and a client would take the new events for
// duplicates); events queued in plain mode that a forgotten receiver's
// seqs may cover are numbered again, for the same reason (renumber).
func (c *Core) bind(s *Session, req *protocol.Request) {
	id := req.Receiver
	if _, ok := s.receivers[id]; !ok && len(s.receivers) >= c.limits.MaxReceiversPerSession {
		c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_receivers_per_session (%d) reached", c.limits.MaxReceiversPerSession))
		return
	}
	if !c.roomForReceiver(s, req.ID, id) {
		return
	}
	r := c.receiver(id)
	c.unlinkIdle(r)
	if old := r.owner; old != nil && old != s {
		delete(old.receivers, id)
		old.out = protocol.AppendTakeover(old.out, id, s.id)
		c.markDirty(old)
		c.peerInfo("receiver taken over", "receiver", id, "from", old.id, "to", s.id)
	}
	r.owner, r.ephemeral = s, req.Ephemeral
	s.receivers[id] = req.Ephemeral
	c.bindMode(r, req.Ack)
	dropped := r.dropped
	r.dropped = 0
	// The reply announces how many backlog events follow it; they go out
	// as the connection drains (route.go), before any newer event of r.
	s.out = protocol.AppendOK(s.out, req.ID, uint64(r.n), dropped, r.firstSeq())
	if r.n > 0 {
		c.hold(s, r)
		c.pump(s)
	}
}

// unbind releases a receiver of s. Unbinding keeps the timers, even of an
// ephemeral bind: only a closing session releases those.
func (c *Core) unbind(s *Session, req *protocol.Request) {
	if _, ok := s.receivers[req.Receiver]; !ok {
		c.fail(s, req.ID, protocol.CodeNotFound, fmt.Sprintf("receiver %d is not bound by this session", req.Receiver))
		return
	}
	delete(s.receivers, req.Receiver)
	r := c.receivers[req.Receiver]
	r.owner = nil
	r.releaseAcked()
	c.forgetIfIdle(r)
	c.ok(s, req.ID)
}

// mayTouch enforces AddOnlyBound: with it, a session changes only the
// timers of receivers it has bound.
func (c *Core) mayTouch(s *Session, req *protocol.Request) bool {
	if !c.addOnlyBound {
		return true
	}
	if _, ok := s.receivers[req.Receiver]; ok {
		return true
	}
	c.fail(s, req.ID, protocol.CodeUnauthorized, fmt.Sprintf("receiver %d is not bound by this session, and the server allows changes only to bound receivers (add_only_bound)", req.Receiver))
	return false
}
