package session

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tickwheel/tickwheel/wheel"
)

// replica is a second Core kept in step with a live one by replaying the
// live Core's records, input by input (sync), so that a test can compare
// the two states (check) at any point between inputs. Before each
// recorded write (inWritten) it compares the bytes the live Core handed
// its writer with the replica's pending output for that session: Replay
// itself only compares their lengths.
//
// The output of inputs recorded only by its length (inPad, inKill: a
// read's reply, an error's text) is zeros in the replay: those bytes are
// left out of the comparison, and check copies the live bytes into them.
//
// Some inputs of the live Core are not recorded although they change what
// a replay must reproduce (see TestReplay*: Core bugs, reported). Until
// they are, the test that drives the live Core also reports them here
// (pumpAll, mayRead, closingInWrite, flushed) so that the replica's state
// stays comparable; each such call is marked as a stand-in for a missing
// record.
type replica struct {
	t    testing.TB
	live *Core
	c    *Core
	// writes are the chunks the live Core's writer was handed with a
	// recorded write, oldest first, not yet matched by the replay.
	writes []chunk
	// pads are the byte ranges of each replica session's pending output
	// that the record gave only the length of.
	pads map[uint64][][2]int
	// unsent is, for a session the live writer closes inside a write, the
	// bytes that closing leaves unsent (see closingInWrite).
	unsent map[uint64]int
	// inputs counts the inputs replayed, for messages.
	inputs int
}

type chunk struct {
	sid uint64
	b   []byte
}

// newReplica returns a replica of live, which must be fresh (nothing
// done yet) and recording; w is a fresh wheel like live's, cfg and limits
// those live was made with.
func newReplica(t testing.TB, live *Core, cfg Config, limits Limits, w *wheel.Wheel) *replica {
	live.Record(true)
	return &replica{t: t, live: live, c: New(cfg, limits, w, nil, nil), pads: make(map[uint64][][2]int), unsent: make(map[uint64]int)}
}

// takeRecord returns a copy of the inputs c recorded since the last call.
func takeRecord(c *Core) []byte {
	b, _ := c.TakeRecord()
	return append([]byte(nil), b...)
}

// wrote notes what the live Core's writer was handed for s. Call it from
// the writer, for every call.
func (r *replica) wrote(s *Session, out []byte) {
	if len(out) > 0 && !s.closed { // as Flush records it
		r.writes = append(r.writes, chunk{s.id, append([]byte(nil), out...)})
	}
}

// sync replays what the live Core recorded since the last sync.
func (r *replica) sync() {
	r.t.Helper()
	r.replay(takeRecord(r.live))
}

// replay replays rec, taken from the live Core.
func (r *replica) replay(rec []byte) {
	r.t.Helper()
	inputs, err := splitRecord(rec)
	if err != nil {
		r.t.Fatalf("replica: the live Core's record does not split: %v: %x", err, rec)
	}
	for _, in := range inputs {
		r.inputs++
		switch in[0] {
		case inWritten:
			r.matchWrite(in)
		case inClose:
			r.standInWriting(in)
		case inPad, inKill:
			d := decoder{b: in[1:]}
			sid, n := d.uv(), int(d.uv())
			if s := r.c.sessions[sid]; s != nil {
				r.pads[sid] = append(r.pads[sid], [2]int{len(s.out), len(s.out) + n})
			}
		}
		var saved []inflight
		var blocked bool
		rs := r.session(in)
		if in[0] == inWritten && rs != nil {
			saved, blocked = slices.Clone(rs.inflight), rs.blocked
		}
		if err := r.c.Replay(in); err != nil {
			r.t.Fatalf("replica: input %d (kind %d): %v", r.inputs, in[0], err)
		}
		if in[0] == inWritten && rs != nil {
			// Stand-in: the live Core forgets the events that reached the
			// kernel once the write is over and the connection has said
			// what it still buffers (flushed); a replayed write does it at
			// once, with what the connection buffered before it.
			rs.inflight, rs.blocked = saved, blocked
		}
	}
}

// session returns the replica's session input in names first, if any.
func (r *replica) session(in []byte) *Session {
	switch in[0] {
	case inClose, inApply, inHello, inBuffered, inWritten, inPad, inKill:
		d := decoder{b: in[1:]}
		return r.c.sessions[d.uv()]
	}
	return nil
}

// flushed stands in for what a write's record leaves out: Flush is done
// with live session s (call it from Flush's after), whose connection's
// report of what it buffers is recorded only when it changed, and which
// forgot the events that reached the kernel then.
func (r *replica) flushed(s *Session) {
	r.sync()
	if rs := r.c.sessions[s.id]; rs != nil && !s.closed {
		r.c.afterWrite(rs)
	}
}

// closingInWrite stands in for what Close does not record (Core bug: it
// records the bytes the connection buffers, not the write in progress it
// also counts as unsent): the live writer is closing session sid, whose
// connection leaves unsent bytes of its output unsent.
func (r *replica) closingInWrite(sid uint64, unsent int) { r.unsent[sid] = unsent }

// standInWriting gives the replica's session the write in progress that
// the recorded close leaves out (see closingInWrite).
func (r *replica) standInWriting(in []byte) {
	d := decoder{b: in[1:]}
	sid, recorded := d.uv(), int(d.uv())
	want, ok := r.unsent[sid]
	delete(r.unsent, sid)
	if s := r.c.sessions[sid]; ok && s != nil && want > recorded {
		s.writing = want - recorded
	}
}

// matchWrite compares a recorded write with the chunk the live writer got.
func (r *replica) matchWrite(in []byte) {
	r.t.Helper()
	d := decoder{b: in[1:]}
	sid, n := d.uv(), int(d.uv())
	if len(r.writes) == 0 {
		r.t.Fatalf("replica: write %d of session %d recorded, none seen by the writer", n, sid)
	}
	w := r.writes[0]
	r.writes = r.writes[1:]
	if w.sid != sid || len(w.b) != n {
		r.t.Fatalf("replica: recorded write of %d bytes to session %d, the writer got %d to session %d", n, sid, len(w.b), w.sid)
	}
	s := r.c.sessions[sid]
	if s == nil {
		r.t.Fatalf("replica: write to session %d, which the replay does not have open", sid)
	}
	if got := r.unpadded(sid, s.out, w.b); !bytes.Equal(got, w.b) {
		r.t.Fatalf("replica: input %d: session %d wrote\n%x\nthe replay has (pads filled)\n%x", r.inputs, sid, w.b, got)
	}
	delete(r.pads, sid)
}

// unpadded returns a copy of out, a replica session's pending output, with
// its padded ranges filled from live, the live session's.
func (r *replica) unpadded(sid uint64, out, live []byte) []byte {
	got := append([]byte(nil), out...)
	for _, p := range r.pads[sid] {
		if p[1] <= len(got) && p[1] <= len(live) {
			copy(got[p[0]:p[1]], live[p[0]:p[1]])
		}
	}
	return got
}

// pumpAll stands in for PumpAll's missing record: it runs PumpAll on the
// replica after the live Core's.
func (r *replica) pumpAll() {
	r.sync()
	r.c.PumpAll(nil)
	r.clearDirty()
}

// mayRead stands in for MayRead's missing record (its block).
func (r *replica) mayRead(s *Session) {
	r.sync()
	if rs := r.c.sessions[s.id]; rs != nil {
		r.c.MayRead(rs, rs.buffered)
	}
	r.clearDirty()
}

// clearDirty forgets the replica's dirty list, as Replay does: the
// replica never flushes.
func (r *replica) clearDirty() {
	for _, s := range r.c.dirty {
		s.dirty = false
	}
	r.c.dirty = r.c.dirty[:0]
}

// check syncs and fails unless the replica's state is the live one's.
// receivers lists receiver ids whose timers the dump must cover besides
// those with a record.
func (r *replica) check(receivers []uint64) {
	r.t.Helper()
	r.sync()
	for sid, s := range r.c.sessions {
		if ls := r.live.sessions[sid]; ls != nil {
			s.out = r.unpadded(sid, s.out, ls.out)
		}
	}
	want, got := dumpState(r.live, receivers, false), dumpState(r.c, receivers, false)
	if want != got {
		r.t.Fatalf("replica: the replayed state differs after %d inputs:\n%s", r.inputs, diffLines(want, got))
	}
}

// splitRecord cuts a record into its inputs, each with its kind byte.
func splitRecord(rec []byte) ([][]byte, error) {
	var out [][]byte
	d := decoder{b: rec}
	for len(d.b) > 0 {
		begin := d.b
		switch kind := d.byte(); kind {
		case inOpen:
			d.uv()
		case inClose, inAdvance, inBuffered, inWritten, inWall, inPad, inKill:
			d.uv()
			d.uv()
		case inApply:
			d.uv()
			d.bytes()
		case inHello:
			d.uv()
			d.uv()
			d.byte()
			d.bytes()
		case inClock:
			d.uv()
			d.uv()
			d.byte()
			d.u64()
			d.uv()
			d.uv()
		case inLimits:
			for range limitFields(&Limits{}) {
				d.uv()
			}
		case inSetClock:
			d.u64()
			d.byte()
		default:
			return out, fmt.Errorf("input kind %d at byte %d", kind, len(rec)-len(begin))
		}
		if d.err != nil {
			return out, d.err
		}
		out = append(out, begin[:len(begin)-len(d.b)])
	}
	return out, nil
}

// dumpState renders everything a replay must reproduce of c's state, in a
// canonical order: tw-time and clock settings, counters, limits, the
// wheel's timers (of the receivers with a record and of receivers), the
// receivers with their backlogs, the sessions with their flow control,
// the stalled list and the waiting fast-forwards. With live it also
// renders what only two live Cores share (the work counter, the more
// flag, the dirty list, read-only).
func dumpState(c *Core, receivers []uint64, live bool) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("target %d caughtUp %v speed %v frozen %v nextSession %d", c.target, c.caughtUp, c.speed, c.frozen, c.nextSession)
	p("fired %d dropped %d lost %d backlogEvents %d backlogBytes %d", c.firedTotal, c.droppedTotal, c.lostTotal, c.backlogEvents, c.backlogBytes)
	p("limits %+v", c.limits)
	if live {
		p("work %d more %v readOnly %q dirty %v", c.work, c.more, c.readOnly, sessionIDs(c.dirty))
	}
	dumpTimers(p, c, receivers)
	for _, id := range sortedKeys(c.receivers) {
		r := c.receivers[id]
		p("receiver %d id %d seq %d owner %d ephemeral %v queuedIn %d dropped %d n %d bytes %d",
			id, r.id, r.seq, idOf(r.owner), r.ephemeral, idOf(r.queuedIn), r.dropped, r.n, r.bytes)
		if r.n > 0 {
			for _, f := range r.backlogFrames() {
				p("  frame %x", f)
			}
		}
	}
	for _, id := range sortedKeys(c.sessions) {
		dumpSession(p, id, c.sessions[id], live)
	}
	p("stalled %v", sessionIDs(c.stalled))
	for _, w := range c.waiters {
		p("waiter session %d id %d done %v target %d fired %d", idOf(w.s), w.id, w.done != nil, w.target, w.fired)
	}
	return b.String()
}

func dumpTimers(p func(string, ...any), c *Core, receivers []uint64) {
	ids := slices.Concat(receivers, sortedKeys(c.receivers))
	slices.Sort(ids)
	ids = slices.Compact(ids)
	p("wheel now %d len %d dataBytes %d", c.wheel.Now(), c.wheel.Len(), c.wheel.DataBytes())
	listed := 0
	for _, r := range ids {
		for _, in := range c.wheel.List(r, nil) {
			listed++
			p("timer %d/%d due %d remaining %d every %d fired %d repeat %d paused %v data %x",
				in.Receiver, in.Tid, in.Due, in.Remaining, in.Every, in.Fired, in.Repeat, in.Paused, in.Data)
		}
	}
	p("timers of other receivers %d", c.wheel.Len()-listed)
}

func dumpSession(p func(string, ...any), id uint64, s *Session, live bool) {
	p("session %d id %d hello %v admin %v name %q authFailures %d kill %v closed %v",
		id, s.id, s.hello, s.admin, s.name, s.authFailures, s.kill, s.closed)
	var rs []string
	for _, r := range sortedKeys(s.receivers) {
		rs = append(rs, fmt.Sprintf("%d:%v", r, s.receivers[r]))
	}
	var queue []uint64
	for _, r := range s.queue {
		queue = append(queue, r.id)
	}
	p("  receivers %v written %d writing %d buffered %d inflight %v queue %v blocked %v stalled %v waiting %v",
		rs, s.written, s.writing, s.buffered, s.inflight, queue, s.blocked, s.stalled, s.waiting)
	p("  out %x", s.out)
	if live {
		p("  dirty %v", s.dirty)
	}
}

func sessionIDs(ss []*Session) []uint64 {
	ids := make([]uint64, len(ss))
	for i, s := range ss {
		ids[i] = idOf(s)
	}
	return ids
}

// diffLines shows the first lines where want and got differ.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 8; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  live:   %s\n  replay: %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// idOf returns s's id, or 0 for no session.
func idOf(s *Session) uint64 {
	if s == nil {
		return 0
	}
	return s.id
}
