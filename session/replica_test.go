package session

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// replica is a second Core kept in step with a live one by replaying the
// live Core's records, input by input (sync), so that a test can compare
// the two states (check) at any point between inputs. Before each
// recorded write (inWritten) it compares the bytes the live Core handed
// its writer with the replica's pending output for that session: Replay
// itself only compares their lengths.
//
// The replies recorded only by their length (a read's, an error's) are
// zeros in the replay: those frames are left out of the comparison, and
// check copies the live bytes into them.
type replica struct {
	t    testing.TB
	live *Core
	c    *Core
	// writes are the chunks the live Core's writer was handed with a
	// recorded write, oldest first, not yet matched by the replay.
	writes []chunk
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
	return &replica{t: t, live: live, c: New(cfg, limits, w, nil, nil)}
}

// takeRecord returns a copy of the inputs c recorded since the last call.
func takeRecord(c *Core) []byte {
	b, _ := c.TakeRecord()
	return append([]byte(nil), b...)
}

// wrote notes what the live Core's writer was handed for s. Call it from
// the writer, for every call.
func (r *replica) wrote(s *Session, out []byte) {
	if len(out) > 0 && !s.closed && !s.quiet() { // as Flush records it (a quiet session's writes are not: quiet.go)
		r.writes = append(r.writes, chunk{s.id, append([]byte(nil), out...)})
	}
}

// sync replays what the live Core recorded since the last sync.
func (r *replica) sync() {
	r.t.Helper()
	r.replay(takeRecord(r.live))
}

// replay replays rec, taken from the live Core, as Replay does (its loop
// over replayOne), stopping between inputs to compare each recorded
// write's bytes.
func (r *replica) replay(rec []byte) {
	r.t.Helper()
	c := r.c
	c.replaying = true
	defer func() {
		c.replaying = false
		r.clearDirty()
	}()
	d := decoder{b: rec}
	for len(d.b) > 0 {
		r.inputs++
		kind := d.byte()
		// The first two fields of the inputs looked at here: session id,
		// and bytes.
		peek := decoder{b: d.b}
		sid, n := peek.uv(), int(peek.uv())
		if rs := c.sessions[sid]; kind == inWritten && rs != nil {
			r.matchWrite(rs, n)
		}
		if err := c.replayOne(kind, &d); err != nil {
			r.t.Fatalf("replica: input %d (kind %d): %v", r.inputs, kind, err)
		}
	}
}

// matchWrite compares a recorded write of n bytes to replica session s
// with the chunk the live writer got.
func (r *replica) matchWrite(s *Session, n int) {
	r.t.Helper()
	if len(r.writes) == 0 {
		r.t.Fatalf("replica: write %d of session %d recorded, none seen by the writer", n, s.id)
	}
	w := r.writes[0]
	r.writes = r.writes[1:]
	if w.sid != s.id || len(w.b) != n {
		r.t.Fatalf("replica: recorded write of %d bytes to session %d, the writer got %d to session %d", n, s.id, len(w.b), w.sid)
	}
	if n > len(s.out) {
		r.t.Fatalf("replica: input %d: session %d wrote %d bytes, the replay has %d", r.inputs, s.id, n, len(s.out))
	}
	// A held session writes the part of its output before what waits for
	// the log (Flush), the rest later.
	if _, err := unpadded(s.out[:n], w.b); err != nil {
		r.t.Fatalf("replica: input %d: session %d: %v; wrote\n%x\nthe replay has\n%x", r.inputs, s.id, err, w.b, s.out)
	}
}

// unpadded returns a copy of out, a replica session's output, with the
// frames the record gave only the length of (zeros in the replay) filled
// in from live, the live session's; it fails unless every other frame is
// the live one's.
func unpadded(out, live []byte) ([]byte, error) {
	if len(out) != len(live) {
		return nil, fmt.Errorf("%d bytes, the live session has %d", len(out), len(live))
	}
	got := append([]byte(nil), out...)
	for off := 0; off < len(live); {
		_, n, err := protocol.SplitFrame(live[off:], math.MaxInt32)
		if err != nil {
			return nil, fmt.Errorf("the live output at %d: %v", off, err)
		}
		frame := got[off : off+n]
		if !bytes.Equal(frame, live[off:off+n]) {
			if bytes.ContainsFunc(frame, func(r rune) bool { return r != 0 }) {
				return nil, fmt.Errorf("the frame at byte %d differs", off)
			}
			copy(frame, live[off:off+n])
		}
		off += n
	}
	return got, nil
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
	r.live.settle() // what the record holds back (quiet.go)
	r.sync()
	for sid, s := range r.c.sessions {
		if ls := r.live.sessions[sid]; ls != nil {
			if out, err := unpadded(s.out, ls.out); err == nil {
				s.out = out // else the dumps differ
			}
		}
	}
	want, got := dumpState(r.live, receivers, false), dumpState(r.c, receivers, false)
	if want != got {
		r.t.Fatalf("replica: the replayed state differs after %d inputs:\n%s", r.inputs, diffLines(want, got))
	}
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
	p("backlogHeld %d outboxHeld %d inflightBytes %d", c.backlogHeld, c.outboxHeld, c.inflightBytes)
	p("limits %+v", c.limits)
	if live {
		p("work %d more %v readOnly %q dirty %v", c.work, c.more, c.readOnly, sessionIDs(c.dirty))
	}
	dumpTimers(p, c, receivers)
	p("%s", dumpPlans(c))
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
	var retained []string
	for r := c.idleHead; r != nil; r = r.idleNext {
		retained = append(retained, fmt.Sprintf("%d@%d", r.id, r.idleAt))
	}
	p("retained %d %v forgotSeq %d", c.idleN, retained, c.forgotSeq)
	groups := encoder{}
	c.appendGroups(&groups) // the groups, paused marks and bulk operations, canonical
	p("groups %x", groups.b)
	p("requestIDs %d bytes %d", c.reqIDs.live, c.reqIDs.bytes)
	for pos := c.reqIDs.first; pos < c.reqIDs.next; pos++ {
		if e := c.reqIDs.at(pos); !e.dead {
			p("  request %d/%d tick %d sum %x reply %x", e.key.client, e.key.id, e.tick, e.sum, c.reqIDs.reply(e))
		}
	}
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
