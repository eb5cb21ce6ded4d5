package server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// FuzzState runs its input as a program over the server's state machine,
// with no sockets. The harness plays the glue (conn.go, server.go) as gnet
// drives it: requests read frame by frame while the session may read,
// held back while it waits for a fast-forward or its output is at
// max_outbound; advance turns; closes; the end-of-turn pump and flush,
// where a write to a reset peer runs OnClose inside the flush; connections
// that stop taking bytes (OutboundBuffered grows) and drain again.
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
//   - at the end, once the connections drain and the wheel catches up, every
//     fast-forward is answered, every held request is read and answered, and
//     no backlog of a bound receiver is left.
//
// The input: byte 0 picks config options, then each step is an op byte —
// action (low 4 bits, see fzOpen...), session slot (bits 4-5), "same turn:
// no flush yet" (bit 6, for requests), a variant flag (bit 7) — and its
// arguments. TICKWHEEL_FUZZ_TRACE=1 logs every step and message.
func FuzzState(f *testing.F) {
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
		}
		h.drain()
		if h.verbose {
			t.Logf("steps:\n%s", strings.Join(h.trace, "\n"))
		}
	})
}

const (
	fzSlots      = 4   // sessions open at once
	fzReceivers  = 5   // receiver ids 0..4, so that sessions collide
	fzTids       = 4   // tids 0..3
	fzMaxSteps   = 500 // steps run of one input
	fzAdminToken = "fz-admin"
)

// Step actions: the low 4 bits of a step's op byte. 1-8 and 15 send a request.
const (
	fzOpen     = 0  // open the slot and say hello (admin with the flag)
	fzRaw      = 9  // a request that does not decode
	fzClose    = 10 // the peer closes: OnClose
	fzAdvance  = 11 // tw-time moves 1-4 ticks (9-12 with the flag), then advance turns
	fzConnSet  = 12 // the connection stops or starts taking bytes; with the flag the peer resets
	fzTurn     = 13 // one advance turn (the doorbell)
	fzOpenBare = 14 // open the slot without hello
)

// fzOps are the requests a step may send, weighted by repetition; a
// request's first byte picks one with its low 5 bits.
var fzOps = [32]protocol.Op{
	protocol.OpBind, protocol.OpBind, protocol.OpBind, protocol.OpBind,
	protocol.OpUnbind, protocol.OpUnbind,
	protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd, protocol.OpAdd,
	protocol.OpCancel, protocol.OpCancel, protocol.OpCancel, protocol.OpCancelAll, protocol.OpCancelAll,
	protocol.OpPause, protocol.OpResume, protocol.OpList, protocol.OpGet, protocol.OpPing,
	protocol.OpFastForward, protocol.OpFastForward, protocol.OpFastForward,
	protocol.OpFreeze, protocol.OpResumeSync, protocol.OpSetSpeed, protocol.OpStats, protocol.OpHello,
}

var fzSpeeds = [...]float64{1, 0.5, 2, 0, -1, math.NaN(), math.Inf(1), 1e9}

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

// fzConn is a connection as the state sees it: the bytes written to it
// that the kernel did not take, which grow while the peer does not read.
type fzConn struct {
	buffered int
	stuck    bool // the peer does not read: writes stay buffered
	reset    bool // the peer reset: the next write fails and runs OnClose
}

func (c *fzConn) OutboundBuffered() int { return c.buffered }

// fzSession is the harness's view of one session.
type fzSession struct {
	s        *session
	conn     *fzConn
	lastID   uint64
	pending  []fzFrame // requests read, awaiting their replies
	held     []fzFrame // requests received and not read yet
	scanned  int       // bytes of s.out checked so far
	seqs     map[uint64]uint64
	eph      []uint64 // its ephemeral receivers before the current call
	released bool     // its close was applied to the timer model
}

// fzFrame is a request frame's payload and what its reply needs of it.
type fzFrame struct {
	payload  []byte
	id       uint64
	op       protocol.Op // 0 for one that does not decode
	receiver uint64
}

type fzHarness struct {
	t      *testing.T
	st     *state
	slots  [fzSlots]*fzSession
	of     map[*session]*fzSession
	timers map[wheel.Key]bool // the timers adds imply, each with "fires forever"
	before [fzReceivers]*receiver
	seqs   map[*receiver]uint64 // per receiver record, the last seq that left the server
	events uint64               // events written to sessions' output
	// verbose (TICKWHEEL_FUZZ_TRACE set) keeps a trace of every step and
	// message, logged at the end and on failure.
	verbose bool
	trace   []string
}

func newFzHarness(t *testing.T, opt byte) *fzHarness {
	cfg := Config{Frozen: true, StartTick: start, AdminToken: fzAdminToken, AddOnlyBound: opt&1 != 0,
		MaxFiresPerTurn: [...]int{1, 3, 10_000, 10_000}[opt>>1&3],
		Limits: Limits{MaxFrame: 1024, MaxData: 64, MaxDataTotal: [...]int{0, 200}[opt>>5&1], MaxTimers: 12,
			MaxTimersPerReceiver: 6, MaxReceiversPerSession: 3, MaxBacklog: [...]int{5, 1}[opt>>3&1],
			MaxBacklogTotal: [...]int{12, 3}[opt>>4&1], MaxBacklogBytes: [...]int{0, 300}[opt>>6&1],
			MaxOutbound: 2048, MaxInbound: 2048, MaxListPage: 3, MaxListBytes: 1024}}
	cfg, err := cfg.withDefaults()
	require.NoError(t, err)
	// A small wheel: cheap to make for every input, and timers move between
	// its levels within a few ticks.
	w, err := wheel.New(start, wheel.Config{Levels: 4, Slots: 16})
	require.NoError(t, err)
	c := wheel.NewClock(start, cfg.Tick, func() time.Duration { return 0 })
	c.Freeze()
	return &fzHarness{t: t, st: newState(cfg, slog.New(slog.DiscardHandler), w, c),
		of: make(map[*session]*fzSession), timers: make(map[wheel.Key]bool), seqs: make(map[*receiver]uint64),
		verbose: os.Getenv("TICKWHEEL_FUZZ_TRACE") != ""}
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
		require.NoError(h.t, h.st.clock.FastForward(ticks))
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
		h.call(func() { h.st.closeSession(fs.s, fs.conn.buffered) }) // OnClose, then its flush
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
		c.stuck, c.buffered = true, h.st.cfg.Limits.MaxOutbound
	}
}

func (h *fzHarness) open(slot int, hello, admin bool) {
	fs := &fzSession{conn: &fzConn{}, seqs: make(map[uint64]uint64)}
	fs.s = h.st.open(fs.conn)
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
	case protocol.OpAdd:
		x := p.byte()
		req.After = uint64(x & 3)
		if x&4 != 0 {
			req.At = h.st.now() + uint64(x>>3&3) - 1 // now-1 .. now+2: the first two are in the past
		}
		req.Every, req.Repeat = uint64(p.n(4)), uint64(p.n(4))
		if x&0x20 != 0 {
			req.Data = make([]byte, p.n(80)) // above max_data (64) sometimes
		}
		req.Replace = x&0x40 != 0
		if x&0x80 != 0 && flags&1 != 0 {
			req.Repeat = math.MaxUint32 + 1
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
	h.receive(fs, fzFrame{payload, req.ID, req.Op, req.Receiver})
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
	for len(fs.held) > 0 && !s.waiting && !s.kill && !s.closed && h.st.mayRead(s) {
		f := fs.held[0]
		fs.held = fs.held[1:]
		h.handle(fs, f)
	}
	held := 0
	for _, f := range fs.held {
		held += protocol.HeaderSize + len(f.payload)
	}
	if (s.waiting || s.blocked) && held > h.st.cfg.Limits.MaxInbound {
		h.call(func() { h.st.malformed(s, 0, errors.New("more than max_inbound")) })
	}
	if len(s.out) > 0 {
		h.st.markDirty(s)
	}
}

func (h *fzHarness) handle(fs *fzSession, f fzFrame) {
	fs.pending = append(fs.pending, f)
	before := len(fs.s.out)
	h.call(func() { h.st.handle(fs.s, f.payload) })
	switch f.op {
	case protocol.OpAdd, protocol.OpCancel, protocol.OpCancelAll:
		h.modelTimers(fs, f.payload, before)
	}
}

// modelTimers applies an add, cancel or cancel_all to the timer model once
// its reply, the first frame its handling appended, says it succeeded.
func (h *fzHarness) modelTimers(fs *fzSession, payload []byte, before int) {
	reply, _, err := protocol.SplitFrame(fs.s.out[before:], math.MaxInt32)
	if err != nil {
		h.fail("session %d: no reply: %v", fs.s.id, err)
	}
	var m protocol.Message
	if err := protocol.DecodeMessage(reply, &m); err != nil || m.Kind != protocol.KindOK {
		return
	}
	var req protocol.Request
	require.NoError(h.t, protocol.DecodeRequest(payload, &req))
	switch k := (wheel.Key{Receiver: req.Receiver, Tid: req.Tid}); req.Op {
	case protocol.OpAdd:
		h.timers[k] = req.Repeat == 0
	case protocol.OpCancel:
		delete(h.timers, k)
	case protocol.OpCancelAll:
		h.dropTimers(req.Receiver)
	}
}

func (h *fzHarness) dropTimers(receiver uint64) {
	for k := range h.timers {
		if k.Receiver == receiver {
			delete(h.timers, k)
		}
	}
}

// call runs fn on the state, then applies the closes it caused (a closing
// session's ephemeral receivers lose their timers and are forgotten), checks
// what it appended to every session's output and that no event was lost
// uncounted.
func (h *fzHarness) call(fn func()) {
	st := h.st
	for i := range h.before {
		h.before[i] = st.receivers[uint64(i)]
	}
	for _, fs := range h.slots {
		if fs != nil && !fs.s.closed {
			fs.eph = fs.eph[:0]
			for id, ephemeral := range fs.s.receivers {
				if ephemeral {
					fs.eph = append(fs.eph, id)
				}
			}
		}
	}
	fn()
	for _, fs := range h.slots {
		if fs != nil && fs.s.closed && !fs.released {
			fs.released = true
			for _, id := range fs.eph {
				h.dropTimers(id)
				if r := st.receivers[id]; r != nil {
					h.fail("session %d closed: its ephemeral receiver %d stays (backlog %d, timers %d)",
						fs.s.id, id, r.n, st.wheel.ReceiverLen(id))
				}
			}
		}
	}
	for _, fs := range h.slots {
		if fs != nil {
			h.scan(fs)
		}
	}
	if st.firedTotal != h.events+st.backlogEvents+st.droppedTotal-st.lostTotal {
		h.fail("%d events fired: %d written out, %d in backlogs, %d dropped, %d of the written lost",
			st.firedTotal, h.events, st.backlogEvents, st.droppedTotal, st.lostTotal)
	}
}

// scan checks the output fs's session got since the last scan.
func (h *fzHarness) scan(fs *fzSession) {
	out := fs.s.out
	if len(out) < fs.scanned {
		h.fail("session %d: output shrank from %d to %d bytes", fs.s.id, fs.scanned, len(out))
	}
	for b := out[fs.scanned:]; len(b) > 0; {
		payload, n, err := protocol.SplitFrame(b, math.MaxInt32)
		if err != nil {
			h.fail("session %d: output is not whole frames: %v: %x", fs.s.id, err, b)
		}
		var m protocol.Message
		if err := protocol.DecodeMessage(payload, &m); err != nil {
			h.fail("session %d: frame does not decode: %v: %x", fs.s.id, err, payload)
		}
		if h.verbose {
			h.note("  -> session %d: %s id %d %s %s fire r%d t%d seq %d receiver %d",
				fs.s.id, m.Kind, m.ID, m.Code, m.Text, m.Fire.Receiver, m.Fire.Tid, m.Fire.Seq, m.Receiver)
		}
		h.message(fs, &m)
		b = b[n:]
	}
	fs.scanned = len(out)
}

func (h *fzHarness) message(fs *fzSession, m *protocol.Message) {
	switch m.Kind {
	case protocol.KindOK, protocol.KindError:
		if m.Kind == protocol.KindError && m.ID == 0 && (len(fs.pending) == 0 || fs.pending[0].id != 0) {
			if !fs.s.kill { // a parting error, ahead of replies that will not come
				h.fail("session %d: error %s %s with id 0, and the session stays open", fs.s.id, m.Code, m.Text)
			}
			return
		}
		if len(fs.pending) == 0 {
			h.fail("session %d: reply %d (%s %s) to no request", fs.s.id, m.ID, m.Code, m.Text)
		}
		p := fs.pending[0]
		fs.pending = fs.pending[1:]
		if m.ID != p.id {
			h.fail("session %d: reply to id %d, want %d (%s)", fs.s.id, m.ID, p.id, p.op)
		}
		switch {
		case m.Kind != protocol.KindOK:
		case p.op == protocol.OpBind:
			if v, err := protocol.DecodeUints(m.Result, nil); err != nil || len(v) != 2 {
				h.fail("session %d: bind result %v %v", fs.s.id, v, err)
			}
			if _, ok := fs.seqs[p.receiver]; !ok {
				fs.seqs[p.receiver] = 0
			}
		case p.op == protocol.OpUnbind:
			delete(fs.seqs, p.receiver)
		}
	case protocol.KindFire:
		h.fire(fs, &m.Fire)
	case protocol.KindTakeover:
		if _, ok := fs.seqs[m.Receiver]; !ok {
			h.fail("session %d: takeover of receiver %d, which it does not hold", fs.s.id, m.Receiver)
		}
		delete(fs.seqs, m.Receiver)
	default:
		h.fail("session %d: message kind %s", fs.s.id, m.Kind)
	}
}

func (h *fzHarness) fire(fs *fzSession, f *protocol.Fire) {
	h.events++
	last, ok := fs.seqs[f.Receiver]
	switch {
	case !ok:
		h.fail("session %d: event of receiver %d, which it does not hold", fs.s.id, f.Receiver)
	case f.Seq <= last:
		h.fail("session %d: receiver %d: seq %d after %d", fs.s.id, f.Receiver, f.Seq, last)
	}
	fs.seqs[f.Receiver] = f.Seq
	// The record the event came from: the one the call ended with, or
	// began with if it forgot it.
	r := h.st.receivers[f.Receiver]
	if r == nil && f.Receiver < fzReceivers {
		r = h.before[f.Receiver]
	}
	if r == nil {
		h.fail("event of receiver %d, which has no record", f.Receiver)
	}
	if f.Seq <= h.seqs[r] {
		h.fail("receiver %d: seq %d left the server after %d", f.Receiver, f.Seq, h.seqs[r])
	}
	h.seqs[r] = f.Seq
}

// flush plays Server.flush: each dirty session's output is written (the
// harness has checked it already); a write to a reset peer runs OnClose
// inside the flush, a session marked kill is closed after its write.
func (h *fzHarness) flush() {
	st := h.st
	for i := 0; i < len(st.dirty); i++ {
		s := st.dirty[i]
		s.dirty = false
		fs := h.of[s]
		if fs.scanned != len(s.out) {
			h.fail("session %d: output not checked", s.id)
		}
		n := len(s.out)
		s.out, fs.scanned = s.out[:0], 0
		if s.closed && !s.kill {
			continue
		}
		if n > 0 {
			s.written += uint64(n)
			s.writing = n
			if fs.conn.reset {
				h.call(func() { st.closeSession(s, fs.conn.buffered+s.writing) })
			} else if fs.conn.stuck {
				fs.conn.buffered += n
			}
			s.writing = 0
			if !s.closed {
				st.afterWrite(s, fs.conn.buffered)
			}
		}
		if s.kill {
			h.call(func() { st.closeSession(s, fs.conn.buffered) })
		}
	}
	clear(st.dirty)
	st.dirty = st.dirty[:0]
}

// endTurn plays the end of a turn — the pump, then the flush — frees the
// slots of closed sessions, and reads on where the glue would wake a
// session (its held frames may be read now), until no session wakes.
func (h *fzHarness) endTurn() {
	for range 1000 {
		h.call(func() { h.st.pumpAll() })
		h.flush()
		woke := false
		for i, fs := range h.slots {
			switch {
			case fs == nil:
			case fs.s.closed:
				if len(fs.s.out) > 0 || fs.s.dirty {
					h.fail("session %d: closed with output", fs.s.id)
				}
				h.slots[i] = nil
			case len(fs.held) > 0 && !fs.s.waiting && !fs.s.blocked && !fs.s.kill:
				n := len(fs.held)
				h.readFrames(fs)
				woke = woke || len(fs.held) < n
			}
		}
		if !woke {
			return
		}
	}
	h.fail("sessions keep waking")
}

// turns runs up to n advance turns while work is left.
func (h *fzHarness) turns(n int) (more bool) {
	for range n {
		h.call(func() { more = h.st.advance() })
		h.endTurn()
		if !more {
			return false
		}
	}
	return more
}

// drain lets every connection read everything and the wheel catch up, then
// checks that nothing is left: no request unanswered or unread, no
// fast-forward waiting, no backlog of a bound receiver.
func (h *fzHarness) drain() {
	h.note("drain")
	for _, fs := range h.slots {
		if fs != nil {
			fs.conn.stuck, fs.conn.buffered = false, 0
		}
	}
	for i := 0; h.turns(1) || h.busy(); i++ {
		h.check()
		if i > 100_000 {
			h.fail("the server does not settle")
		}
	}
	h.check()
	for _, fs := range h.slots {
		if fs != nil && !fs.s.kill && (len(fs.pending) > 0 || len(fs.held) > 0 || fs.s.blocked) {
			h.fail("session %d: %d requests unanswered, %d unread, blocked %v", fs.s.id, len(fs.pending), len(fs.held), fs.s.blocked)
		}
	}
	for id, r := range h.st.receivers {
		if r.owner != nil && r.n > 0 {
			h.fail("receiver %d: %d events never delivered to session %d", id, r.n, r.owner.id)
		}
	}
}

// busy reports whether a session still waits or has unread requests.
func (h *fzHarness) busy() bool {
	for _, fs := range h.slots {
		if fs != nil && !fs.s.kill && (fs.s.waiting || len(fs.held) > 0 || len(fs.s.queue) > 0) {
			return true
		}
	}
	return false
}

// check checks the invariants that hold between steps.
func (h *fzHarness) check() {
	h.checkReceivers()
	h.checkSessions()
	h.checkTimers()
}

func (h *fzHarness) checkReceivers() {
	st, l := h.st, h.st.cfg.Limits
	backlog := 0
	for id, r := range st.receivers {
		o := r.owner
		ephemeral, listed := false, false
		if o != nil {
			ephemeral, listed = o.receivers[id]
		}
		switch {
		case r.id != id:
			h.fail("receiver %d filed as %d", r.id, id)
		case o != nil && (o.closed || st.sessions[o.id] != o):
			h.fail("receiver %d: owner session %d is closed", id, o.id)
		case o != nil && (!listed || ephemeral != r.ephemeral):
			h.fail("receiver %d: owner session %d does not list it (ephemeral %v)", id, o.id, r.ephemeral)
		case o != nil && r.n > 0 && (r.queuedIn != o || !o.stalled):
			h.fail("receiver %d: %d events held for session %d, which will not pump them", id, r.n, o.id)
		case o == nil && r.n == 0 && r.dropped == 0 && st.wheel.ReceiverLen(id) == 0:
			h.fail("receiver %d: idle but not forgotten", id)
		case r.n > l.MaxBacklog:
			h.fail("receiver %d: backlog %d over max_backlog", id, r.n)
		}
		backlog += r.n
	}
	if uint64(backlog) != st.backlogEvents || backlog > l.MaxBacklogTotal {
		h.fail("backlogs hold %d events, backlog_events says %d", backlog, st.backlogEvents)
	}
	for _, r := range st.recvCache {
		if r != nil && st.receivers[r.id] != r {
			h.fail("receiver cache: a stale record of receiver %d", r.id)
		}
	}
}

func (h *fzHarness) checkSessions() {
	st := h.st
	for id, s := range st.sessions {
		for rid := range s.receivers {
			if r := st.receivers[rid]; r == nil || r.owner != s {
				h.fail("session %d lists receiver %d, which it does not own", id, rid)
			}
		}
		if s.id != id || s.closed || len(s.receivers) > st.cfg.Limits.MaxReceiversPerSession {
			h.fail("session %d filed as %d, closed %v, %d receivers", s.id, id, s.closed, len(s.receivers))
		}
	}
	for _, fs := range h.slots {
		switch s := fs; {
		case s == nil:
		case s.s.closed == (st.sessions[s.s.id] == s.s):
			h.fail("session %d: closed %v, filed %v", s.s.id, s.s.closed, st.sessions[s.s.id] != nil)
		case len(s.s.out) > 0 && !s.s.dirty:
			h.fail("session %d: output but not dirty: it would never be written", s.s.id)
		case s.s.waiting && !slices.ContainsFunc(st.waiters, func(w waiter) bool { return w.s == s.s }):
			h.fail("session %d: waiting for no fast-forward", s.s.id)
		case !s.s.closed && (s.s.blocked || len(s.s.queue) > 0) && !s.s.stalled:
			h.fail("session %d: blocked or with events held, but not stalled: never pumped", s.s.id)
		case !s.s.closed && !s.s.kill && !s.s.waiting && len(s.held) == 0 && len(s.pending) > 0:
			h.fail("session %d: request %+v not answered", s.s.id, s.pending[0])
		}
	}
	for _, w := range st.waiters {
		if w.s != nil && (w.s.closed || !w.s.waiting) {
			h.fail("a fast-forward waits for session %d, closed %v waiting %v", w.s.id, w.s.closed, w.s.waiting)
		}
	}
}

// checkTimers compares the wheel with the timer model: a timer no add
// explains, or a forever timer gone without a cancel, is a bug; timers
// with a repeat count leave the model when they are gone.
func (h *fzHarness) checkTimers() {
	st, l := h.st, h.st.cfg.Limits
	live := 0
	for r := range uint64(fzReceivers) {
		n := 0
		for tid := range uint64(fzTids) {
			k := wheel.Key{Receiver: r, Tid: tid}
			_, err := st.wheel.Get(k)
			forever, known := h.timers[k]
			switch exists := err == nil; {
			case exists && !known:
				h.fail("timer %v exists, no add explains it", k)
			case !exists && known && forever:
				h.fail("timer %v firing forever is gone", k)
			case !exists && known:
				delete(h.timers, k)
			case exists:
				n++
			}
		}
		if got := st.wheel.ReceiverLen(r); got != n || n > l.MaxTimersPerReceiver {
			h.fail("receiver %d: %d timers, ReceiverLen says %d", r, n, got)
		}
		live += n
	}
	if st.wheel.Len() != live || live > l.MaxTimers {
		h.fail("%d timers, Len says %d, max_timers %d", live, st.wheel.Len(), l.MaxTimers)
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
	return []fzSeed{crash, crashClose, takeover, slow, ff}
}
