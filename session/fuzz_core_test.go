package session

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// FuzzCore runs its input as a program over the Core, with no sockets. The
// harness plays the server's glue (server/conn.go, bell.go) as gnet drives
// it: requests read frame by frame while the session may read, held back
// while it waits for a fast-forward or its output is at max_outbound;
// advance turns to the harness's own tw-time (a tick counter, which clock
// ops move through the clock hook); closes; the end-of-turn pump and
// Flush, whose writer plays a connection that buffers what its peer does
// not read, and where a write to a reset peer closes the session inside
// the flush; connections that stop taking bytes and drain again.
//
// After every state call and step it checks what must always hold:
//   - every session's output is whole frames that decode;
//   - replies come in request order, one per request unless the session was
//     closed (an error with id 0 may part a closing session ahead of them);
//     a session gets events only of receivers it holds, their seq
//     increasing; per receiver record, the seqs that leave the server
//     increase;
//   - no event is lost uncounted: fired = events written out + events in
//     backlogs + dropped - lost (lost ones were written out, then counted);
//   - the wheel holds exactly the timers that adds, cancels and ephemeral
//     releases imply, within max_timers and max_timers_per_receiver;
//   - receivers and sessions point at each other, idle receivers are
//     forgotten, a closed session's ephemeral receivers too, backlog_events
//     is the sum of the backlogs, a bound receiver's backlog is queued for
//     its session, output waiting for a flush is marked dirty;
//   - replaying the Core's records into a second Core, input by input, gives
//     the same state (dumpState) every fzReplayEvery steps and at the end,
//     and each recorded write hands the same bytes as the live Core's (see replica; the inputs the
//     Core does not record yet are stood in for there);
//   - at the end, once the connections drain and the wheel catches up, every
//     fast-forward is answered, every held request is read and answered, and
//     no backlog of a bound receiver is left.
//
// The input: byte 0 picks config options, then each step is an op byte —
// action (low 4 bits, see fzOpen...), session slot (bits 4-5), "same turn:
// no flush yet" (bit 6, for requests), a variant flag (bit 7) — and its
// arguments. TICKWHEEL_FUZZ_TRACE=1 logs every step and message.
func FuzzCore(f *testing.F) {
	for _, seed := range fzSeeds() {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) == 0 {
			return
		}
		h := newFzHarness(t, prog[0])
		p := &fzProg{b: prog[1:]}
		for i := 0; i < fzMaxSteps && len(p.b) > 0; i++ {
			h.step(p)
			h.check()
			if i%fzReplayEvery == fzReplayEvery-1 {
				h.rep.check(fzReceiverIDs) // the written bytes are compared at every step
			}
		}
		h.drain()
		if h.verbose {
			t.Logf("steps:\n%s", strings.Join(h.trace, "\n"))
		}
	})
}

const (
	fzSlots     = 4   // sessions open at once
	fzReceivers = 5   // receiver ids 0..4, so that sessions collide
	fzTids      = 4   // tids 0..3
	fzMaxSteps  = 500 // steps run of one input
	// fzReplayEvery is how often (in steps) the replayed state is compared
	// in full, and at the end: dumping both states takes longer than a step.
	fzReplayEvery = 8
	fzAdminToken  = "fz-admin"
)

// Step actions: the low 4 bits of a step's op byte. 1-8 and 15 send a request.
const (
	fzOpen     = 0  // open the slot and say hello (admin with the flag)
	fzRaw      = 9  // a request that does not decode
	fzClose    = 10 // the peer closes: Close
	fzAdvance  = 11 // tw-time moves 1-4 ticks (9-12 with the flag), then advance turns
	fzConnSet  = 12 // the connection stops or starts taking bytes; with the flag the peer resets
	fzTurn     = 13 // one advance turn (the doorbell); with the flag, a downtime of 1-8 ticks first
	fzOpenBare = 14 // open the slot without hello
)

// fzOps are the requests a step may send, weighted by repetition; a
// request's first byte picks one with its low 5 bits.
var fzOps = [32]protocol.Op{
	protocol.OpBind, protocol.OpBind, protocol.OpBind, protocol.OpBind,
	protocol.OpUnbind, protocol.OpUnbind,
	protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAck,
	protocol.OpCancel, protocol.OpCancel, protocol.OpCancel, protocol.OpCancelAll, protocol.OpCancelAll,
	protocol.OpPause, protocol.OpResume, protocol.OpList, protocol.OpGet, protocol.OpPing,
	protocol.OpFastForward, protocol.OpFastForward, protocol.OpFastForward,
	protocol.OpFreeze, protocol.OpResumeSync, protocol.OpSetSpeed, protocol.OpStats, protocol.OpHello,
}

var fzSpeeds = [...]float64{1, 0.5, 2, 0, -1, math.NaN(), math.Inf(1), 1e9}

// fzSchedules are the calendar schedules adds may carry: with one-minute
// ticks, most fire within a few ticks; the last is invalid.
var fzSchedules = [8]string{"* * * * *", "*/2 * * * *", "@every 90s", "*/3 * * * 1-5", "1-59/7 * * * *", "@every 1m", "0 * * * *", "0 24 * * *"}

var fzZones = [...]string{"", "Europe/Paris", "Australia/Lord_Howe", "America/New_York", "Asia/Kolkata", "Nowhere/Atlantis"}

// fzProg reads a program; past its end every byte is 0.
type fzProg struct{ b []byte }

func (p *fzProg) byte() byte {
	if len(p.b) == 0 {
		return 0
	}
	v := p.b[0]
	p.b = p.b[1:]
	return v
}

// n returns a number below k.
func (p *fzProg) n(k int) int { return int(p.byte()) % k }

// fzConn is a connection as the Core hears of it: the bytes written to it
// that the kernel did not take, which grow while the peer does not read.
type fzConn struct {
	buffered int
	stuck    bool // the peer does not read: writes stay buffered
	reset    bool // the peer reset: the next write fails and closes the session
}

// fzSession is the harness's view of one session.
type fzSession struct {
	s        *Session
	conn     *fzConn
	lastID   uint64
	pending  []fzFrame // requests read, awaiting their replies
	held     []fzFrame // requests received and not read yet
	scanned  int       // bytes of s.out checked so far
	seqs     map[uint64]uint64
	acked    map[uint64]bool // receivers it bound in acknowledged mode
	eph      []uint64        // its ephemeral receivers before the current call
	released bool            // its close was applied to the timer model
}

// fzFrame is a request frame's payload and what its reply needs of it.
type fzFrame struct {
	payload  []byte
	id       uint64
	op       protocol.Op // 0 for one that does not decode
	receiver uint64
	ack      bool // a bind in acknowledged mode
}

type fzHarness struct {
	t        *testing.T
	c        *Core
	limits   Limits
	maxFires int
	now      uint64   // tw-time: Advance's target
	rep      *replica // replays c's records
	slots    [fzSlots]*fzSession
	of       map[*Session]*fzSession
	timers   map[wheel.Key]bool   // the timers adds imply, each with "fires forever"
	groups   map[wheel.Key]uint64 // the group of each timer adds put in one
	before   [fzReceivers]*receiver
	seqs     map[*receiver]uint64 // per receiver record, the last seq that left the server
	high     map[*receiver]uint64 // per receiver record, the highest seq that left the server (redeliveries repeat seqs)
	events   uint64               // events written to sessions' output
	// verbose (TICKWHEEL_FUZZ_TRACE set) keeps a trace of every step and
	// message, logged at the end and on failure.
	verbose bool
	trace   []string
}

func newFzHarness(t *testing.T, opt byte) *fzHarness {
	cfg := Config{AdminToken: fzAdminToken, AddOnlyBound: opt&1 != 0, TickNs: 60_000_000_000, // a minute: calendar timers fire often
		MaxFiresPerTurn: [...]int{1, 3, 10_000, 10_000}[opt>>1&3]}
	limits := Limits{MaxFrame: 1024, MaxData: 64, MaxDataTotal: [...]int{0, 200}[opt>>5&1], MaxTimers: 12,
		MaxTimersPerReceiver: 6, MaxReceiversPerSession: 3, MaxBacklog: [...]int{5, 1}[opt>>3&1],
		MaxBacklogTotal: [...]int{12, 3}[opt>>4&1], MaxBacklogBytes: [...]int{0, 300}[opt>>6&1],
		MaxOutbound: 2048, MaxOutboundTotal: 3000, MaxInbound: 2048, MaxListPage: 3, MaxListBytes: 1024,
		MaxOutbox: [...]int{4, 1}[opt>>3&1], MaxOutboxTotal: [...]int{10, 3}[opt>>4&1], MaxOutboxBytes: [...]int{0, 300}[opt>>6&1],
		MaxReceivers: 4, AckRetentionTicks: [...]int{2, 1000}[opt>>7&1], MaxBulkPerTurn: 2}
	// A small wheel: cheap to make for every input, and timers move between
	// its levels within a few ticks.
	wheels := [2]*wheel.Wheel{}
	for i := range wheels {
		w, err := wheel.New(start, wheel.Config{Levels: 4, Slots: 16})
		require.NoError(t, err)
		wheels[i] = w
	}
	h := &fzHarness{t: t, c: New(cfg, limits, wheels[0], nil, nil), maxFires: cfg.MaxFiresPerTurn, now: start,
		of: make(map[*Session]*fzSession), timers: make(map[wheel.Key]bool), groups: make(map[wheel.Key]uint64), seqs: make(map[*receiver]uint64), high: make(map[*receiver]uint64),
		verbose: os.Getenv("TICKWHEEL_FUZZ_TRACE") != ""}
	h.limits = h.c.Limits()
	h.rep = newReplica(t, h.c, cfg, limits, wheels[1])
	// Where tw-time is inside its tick, for after_ns: a pseudo-random
	// point of the current tick.
	h.c.SetInstantHook(func() (uint64, uint64) { return h.now, h.now * 7919 % cfg.TickNs })
	// tw-time's clock is frozen: only fast-forwards move it.
	h.c.SetClockHook(func(op ClockOp, _ float64, ticks uint64) uint64 {
		if op == ClockFastForward {
			h.now += ticks
		}
		return h.now
	})
	return h
}

func (h *fzHarness) fail(format string, args ...any) {
	h.t.Helper()
	if !h.verbose {
		h.t.Fatalf(format+" (TICKWHEEL_FUZZ_TRACE=1 shows the steps)", args...)
	}
	h.t.Fatalf("%s\nsteps:\n%s", fmt.Sprintf(format, args...), strings.Join(h.trace, "\n"))
}

// note adds a line to the trace, when there is one.
func (h *fzHarness) note(format string, args ...any) {
	if h.verbose {
		h.trace = append(h.trace, fmt.Sprintf(format, args...))
	}
}

// step runs one step of p.
func (h *fzHarness) step(p *fzProg) {
	op := p.byte()
	action, slot, sameTurn, flag := op&15, int(op>>4&3), op&0x40 != 0, op&0x80 != 0
	fs := h.slots[slot]
	switch {
	case action == fzAdvance:
		ticks := uint64(1 + p.n(4))
		if flag {
			ticks += 8
		}
		h.note("advance %d", ticks)
		h.now += ticks
		h.turns(64)
		return
	case action == fzTurn && flag:
		// A restart's downtime: tw-time jumps and the missed-firing
		// policies apply to the firings in between.
		from := h.c.Now()
		h.now = max(h.now, from) + uint64(1+p.n(8))
		h.note("downtime %d..%d", from, h.now)
		h.call(func() { h.c.Downtime(from, h.now) })
		h.rep.sync()
		h.turns(64)
		return
	case action == fzTurn:
		h.note("turn")
		h.turns(1)
		return
	case fs == nil:
		h.open(slot, action != fzOpenBare, flag)
	case action == fzClose:
		h.note("%d: close", slot)
		h.call(func() { h.c.Close(fs.s, fs.conn.buffered) }) // OnClose, then its flush
	case action == fzConnSet:
		h.setConn(fs, p.n(4), flag)
		h.note("%d: conn %+v", slot, *fs.conn)
	case action == fzRaw:
		h.raw(p, fs)
	default:
		req := h.request(p)
		h.note("%d: %s r%d t%d %+v", slot, req.Op, req.Receiver, req.Tid, req)
		h.send(fs, req)
	}
	if !sameTurn || action == fzClose {
		h.endTurn()
	}
}

// setConn: the peer stops reading (the socket takes nothing more), reads
// everything, reads half, or has max_outbound bytes unread; or resets.
func (h *fzHarness) setConn(fs *fzSession, how int, reset bool) {
	c := fs.conn
	switch {
	case reset:
		c.reset = true
	case how == 0:
		c.stuck = true
	case how == 1:
		c.stuck, c.buffered = false, 0
	case how == 2:
		c.buffered /= 2
	default:
		c.stuck, c.buffered = true, h.limits.MaxOutbound
	}
}

func (h *fzHarness) open(slot int, hello, admin bool) {
	fs := &fzSession{conn: &fzConn{}, seqs: make(map[uint64]uint64), acked: make(map[uint64]bool)}
	h.call(func() { fs.s = h.c.Open() })
	h.slots[slot], h.of[fs.s] = fs, fs
	h.note("%d: open session %d, hello %v admin %v", slot, fs.s.id, hello, admin)
	if hello {
		token := ""
		if admin {
			token = fzAdminToken
		}
		h.send(fs, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "fz", Token: token})
	}
}

// request reads a well-formed request of a random op with small arguments.
func (h *fzHarness) request(p *fzProg) protocol.Request {
	a := p.byte()
	flags := a >> 5
	req := protocol.Request{Op: fzOps[a&31], Receiver: uint64(p.n(fzReceivers)), Tid: uint64(p.n(fzTids))}
	switch req.Op {
	case protocol.OpBind:
		req.Ephemeral = flags&1 != 0
		req.Ack = flags&2 != 0
	case protocol.OpAck: // about the receiver's outbox: below, in, and past what was sent
		req.Seq = uint64(p.n(4))
		if r := h.c.receivers[req.Receiver]; r != nil {
			req.Seq += r.firstSeq() - 2 + uint64(r.sent)/2*uint64(flags&1)
		}
	case protocol.OpAdd:
		x := p.byte()
		req.After = uint64(x & 3)
		if x&4 != 0 {
			req.At = h.c.Now() + uint64(x>>3&3) - 1 // now-1 .. now+2: the first two are in the past
		} else if x&8 != 0 {
			req.AfterNs = 1 + uint64(x>>4&1)*15_000_000 // 1ns or 1.5 ticks, from inside the tick
		}
		req.Every, req.Repeat = uint64(p.n(4)), uint64(p.n(4))
		if x&0x20 != 0 {
			req.Data = make([]byte, p.n(80)) // above max_data (64) sometimes
		}
		req.Replace = x&0x40 != 0
		if x&0x80 != 0 && flags&1 != 0 {
			req.Repeat = math.MaxUint32 + 1
		}
		if flags&2 != 0 { // a calendar schedule (a tick is a minute here); mostly without after/at/every
			req.Schedule = fzSchedules[int(req.Every)+4*int(x>>3&1)]
			req.Zone = fzZones[(req.Tid+uint64(x&4)/2)%uint64(len(fzZones))]
			if x&1 == 0 {
				req.After, req.At, req.Every = 0, 0, 0
			}
		}
		if flags&4 != 0 {
			req.Missed = uint64(x >> 3 & 3) // 3 is not a policy
		}
		req.Group = uint64(x>>4&1) * (1 + req.Receiver%2) // groups 1 and 2 span receivers
	case protocol.OpCancelAll: // the bulk operations (issue 27) and list_group, of a receiver or a group
		req.Op = [...]protocol.Op{protocol.OpCancelAll, protocol.OpPauseAll, protocol.OpResumeAll, protocol.OpListGroup}[flags>>1&3]
		switch {
		case req.Op == protocol.OpListGroup:
			req.Group, req.FromReceiver, req.FromTid, req.Limit = uint64(flags&1)+1, req.Receiver, req.Tid, uint64(p.n(4))
		case flags&1 != 0:
			req.Receiver, req.Group = 0, 1+req.Tid%2
			if req.Op == protocol.OpCancelAll {
				req.Op = protocol.OpCancelGroup
			}
		}
	case protocol.OpList:
		req.FromTid, req.Limit = uint64(p.n(fzTids)), uint64(p.n(4))
	case protocol.OpFastForward:
		req.Ticks = uint64(p.n(8))
		if flags == 7 {
			req.Ticks = math.MaxUint64
		}
	case protocol.OpSetSpeed:
		req.Speed = fzSpeeds[p.n(len(fzSpeeds))]
	case protocol.OpHello:
		req.Version = protocol.Version
		if flags&4 != 0 {
			req.Version++
		}
		req.Token = [...]string{"", fzAdminToken, "wrong", ""}[flags&3]
	}
	return req
}

// raw sends a request that does not decode: random bytes, a request cut
// short or a request with one byte changed. One that decodes is not sent.
func (h *fzHarness) raw(p *fzProg, fs *fzSession) {
	var payload []byte
	switch mode := p.n(3); mode {
	case 0:
		payload = make([]byte, 1+p.n(24))
		for i := range payload {
			payload[i] = p.byte()
		}
	default:
		req := h.request(p)
		payload = protocol.AppendRequest(nil, &req)[protocol.HeaderSize:]
		if mode == 1 {
			payload = payload[:1+p.n(len(payload)-1)]
		} else {
			payload[p.n(len(payload))] = p.byte()
		}
	}
	var req protocol.Request
	if protocol.DecodeRequest(payload, &req) == nil {
		return
	}
	h.note("raw %x", payload)
	h.receive(fs, fzFrame{payload: payload, id: req.ID})
}

// send sends req with the session's next id.
func (h *fzHarness) send(fs *fzSession, req protocol.Request) {
	fs.lastID++
	req.ID = fs.lastID
	payload := protocol.AppendRequest(nil, &req)[protocol.HeaderSize:]
	h.receive(fs, fzFrame{payload, req.ID, req.Op, req.Receiver, req.Ack})
}

// receive plays OnTraffic for a frame arriving: the connection buffers it
// unless the session is closing, and readFrames reads what it may.
func (h *fzHarness) receive(fs *fzSession, f fzFrame) {
	if !fs.s.kill && !fs.s.closed {
		fs.held = append(fs.held, f)
		h.readFrames(fs)
	}
}

// readFrames plays the glue's readFrames: it handles held frames while the
// session may read, and closes one that has held back more than
// max_inbound bytes.
func (h *fzHarness) readFrames(fs *fzSession) {
	s := fs.s
	for len(fs.held) > 0 && !s.waiting && !s.kill && !s.closed && h.mayRead(fs) {
		f := fs.held[0]
		fs.held = fs.held[1:]
		h.handle(fs, f)
	}
	held := 0
	for _, f := range fs.held {
		held += protocol.HeaderSize + len(f.payload)
	}
	if (s.waiting || s.blocked) && held > h.limits.MaxInbound {
		h.call(func() { h.c.Malformed(s, 0, errors.New("more than max_inbound")) })
	}
}

// mayRead plays the glue's mayRead: the Core hears how much the
// connection buffers, and may block the session.
func (h *fzHarness) mayRead(fs *fzSession) (ok bool) {
	h.call(func() { ok = h.c.MayRead(fs.s, fs.conn.buffered) })
	return ok
}

func (h *fzHarness) handle(fs *fzSession, f fzFrame) {
	fs.pending = append(fs.pending, f)
	before := len(fs.s.out)
	h.call(func() { h.c.Apply(fs.s, f.payload) })
	switch f.op {
	case protocol.OpAdd, protocol.OpCancel, protocol.OpCancelAll, protocol.OpCancelGroup:
		h.modelTimers(fs, f.payload, before)
	}
}

// inScope reports whether the timer model's k is among the timers a
// bulk operation of req covers.
func (h *fzHarness) inScope(k wheel.Key, req *protocol.Request) bool {
	if req.Group != 0 {
		return h.groups[k] == req.Group
	}
	return k.Receiver == req.Receiver
}

// modelTimers applies an add, cancel or cancel_all to the timer model once
// its reply, the first frame its handling appended, says it succeeded. A
// cancel_all in progress (no reply yet) was accepted: every timer it
// covers may go from now on, and none added after it.
func (h *fzHarness) modelTimers(fs *fzSession, payload []byte, before int) {
	var req protocol.Request
	require.NoError(h.t, protocol.DecodeRequest(payload, &req))
	if (req.Op == protocol.OpCancelAll || req.Op == protocol.OpCancelGroup) && len(fs.s.out) == before {
		if !fs.s.waiting {
			h.fail("session %d: cancel_all neither answered nor in progress", fs.s.id)
		}
		for k := range h.timers {
			if h.inScope(k, &req) {
				h.timers[k] = false // may go
			}
		}
		return
	}
	reply, _, err := protocol.SplitFrame(fs.s.out[before:], math.MaxInt32)
	if err != nil {
		h.fail("session %d: no reply: %v", fs.s.id, err)
	}
	var m protocol.Message
	if err := protocol.DecodeMessage(reply, &m); err != nil || m.Kind != protocol.KindOK {
		return
	}
	switch k := (wheel.Key{Receiver: req.Receiver, Tid: req.Tid}); req.Op {
	case protocol.OpAdd:
		h.timers[k] = req.Repeat == 0
		// An add whose first firing is not in the future is due at the
		// next tick of tw-time (soonest), never refused for it.
		now := h.c.Now()
		if req.Schedule == "" && (req.At != 0 && req.At <= now || req.At == 0 && req.After == 0 && req.AfterNs == 0) {
			if v, err := protocol.DecodeUints(m.Result, nil); err != nil || len(v) != 1 || v[0] != now+1 {
				h.fail("add %+v at tw-time %d: due %v, want the next tick", req, now, v)
			}
		}
		h.groups[k] = req.Group
	case protocol.OpCancel:
		delete(h.timers, k)
	case protocol.OpCancelAll, protocol.OpCancelGroup: // done in the request's own turn
		for k := range h.timers {
			if h.inScope(k, &req) {
				delete(h.timers, k)
			}
		}
	}
}

func (h *fzHarness) dropTimers(receiver uint64) {
	for k := range h.timers {
		if k.Receiver == receiver {
			delete(h.timers, k)
		}
	}
}

// fzSeed builds programs for the seed corpus.
type fzSeed []byte

func (b fzSeed) step(action byte, slot int, sameTurn, flag bool, args ...byte) fzSeed {
	op := action | byte(slot)<<4
	if sameTurn {
		op |= 0x40
	}
	if flag {
		op |= 0x80
	}
	return append(append(b, op), args...)
}

func (b fzSeed) open(slot int, admin bool) fzSeed { return b.step(fzOpen, slot, false, admin) }

// req appends a request; args are the op's own bytes (see request).
func (b fzSeed) req(slot int, sameTurn bool, op protocol.Op, flags, receiver, tid byte, args ...byte) fzSeed {
	i := slices.Index(fzOps[:], op)
	return b.step(1, slot, sameTurn, false, append([]byte{byte(i) | flags<<5, receiver, tid}, args...)...)
}

// bindEvery binds receiver (ephemeral with eph) and adds a timer firing on
// it every tick forever.
func (b fzSeed) bindEvery(slot int, eph, receiver byte) fzSeed {
	return b.req(slot, false, protocol.OpBind, eph, receiver, 0).req(slot, false, protocol.OpAdd, 0, receiver, 1, 1, 0, 0)
}

func (b fzSeed) advance(ticks byte) fzSeed { return b.step(fzAdvance, 0, false, false, ticks-1) }

func fzSeeds() []fzSeed {
	// The crash of 4469f30: every session bound with a timer firing every
	// tick, all closing while their output is pending: their peers reset,
	// so the flush's writes close them inside the flush; or they close
	// before the flush.
	crash, crashClose := fzSeed{4}, fzSeed{4}
	for slot := range fzSlots {
		crash = crash.open(slot, true).bindEvery(slot, byte(slot&1), byte(slot))
		crashClose = crashClose.open(slot, true).bindEvery(slot, byte(slot&1), byte(slot))
	}
	crash, crashClose = crash.advance(1), crashClose.advance(1)
	for slot := range fzSlots {
		crash = crash.step(fzConnSet, slot, true, true, 0) // the peer resets
		crashClose = crashClose.req(slot, true, protocol.OpPing, 0, 0, 0)
	}
	for slot := range fzSlots {
		crashClose = crashClose.step(fzClose, slot, true, false)
	}
	crash = crash.advance(2).open(0, false).req(0, false, protocol.OpPing, 0, 0, 0)
	crashClose = crashClose.advance(1).open(1, false).req(1, false, protocol.OpBind, 0, 0, 0)
	// A takeover, unbinds, a backlog delivered on a bind, an ephemeral
	// release.
	takeover := fzSeed{4}.open(0, true).open(1, false).bindEvery(0, 0, 1).advance(2).
		req(1, false, protocol.OpBind, 0, 1, 0).advance(2).req(0, false, protocol.OpUnbind, 0, 1, 0).
		req(1, false, protocol.OpUnbind, 0, 1, 0).advance(3).req(0, false, protocol.OpBind, 1, 1, 0).advance(1).
		step(fzClose, 0, false, false).advance(1)
	// A session that stops reading: its events are held back, bounded, and
	// delivered in order once it drains; its requests wait meanwhile.
	slow := fzSeed{4}.open(0, true).req(0, false, protocol.OpBind, 0, 2, 0)
	for tid := range byte(3) {
		slow = slow.req(0, false, protocol.OpAdd, 0, 2, tid, 0x21, 0, 0, 60) // every tick, 60 bytes of data
	}
	slow = slow.step(fzConnSet, 0, false, false, 3).advance(4).req(0, false, protocol.OpPing, 0, 0, 0).advance(4).
		step(fzConnSet, 0, false, false, 1).step(fzTurn, 0, false, false).open(1, false).req(1, false, protocol.OpBind, 0, 2, 0).advance(1)
	// Requests pipelined behind fast-forwards that take several turns.
	ff := fzSeed{0}.open(0, true).bindEvery(0, 0, 0).req(0, false, protocol.OpAdd, 0, 0, 2, 1, 0, 0).
		req(0, true, protocol.OpFastForward, 0, 0, 0, 5).req(0, true, protocol.OpPing, 0, 0, 0).
		req(0, true, protocol.OpCancel, 0, 0, 1).req(0, true, protocol.OpFastForward, 0, 0, 0, 3).
		req(0, false, protocol.OpList, 0, 0, 0, 0, 2).step(fzTurn, 0, false, false).step(fzTurn, 0, false, false)
	// Calendar timers with missed-firing policies across a downtime: "@every
	// 1m" missing once, "* * * * *" skipping, in Europe/Paris.
	sched := fzSeed{0}.open(0, true).req(0, false, protocol.OpBind, 0, 3, 0).
		req(0, false, protocol.OpAdd, 6, 3, 1, 0x08, 1, 0).req(0, false, protocol.OpAdd, 6, 3, 2, 0x10, 0, 0).
		advance(2).step(fzTurn, 0, false, true, 5).advance(3).req(0, false, protocol.OpList, 0, 3, 0, 0, 3)
	return []fzSeed{crash, crashClose, takeover, slow, ff, sched}
}
