package session

import (
	"bytes"
	"maps"
	"math"
	"slices"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// FuzzCore's harness, continued: how it plays the glue around the Core
// (the turn's end: pump, flush, reading on) and the invariants it checks
// after every change.

// call runs fn on the Core, then applies the closes it caused (a closing
// session's ephemeral receivers lose their timers and are forgotten), checks
// what it appended to every session's output and that no event was lost
// uncounted.
func (h *fzHarness) call(fn func()) {
	st := h.c
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
	if queued := h.unsent(); st.firedTotal != h.events+queued+st.parkedTotal+st.droppedTotal-st.lostTotal {
		h.fail("%d events fired: %d written out, %d in backlogs never written, %d parked, %d dropped, %d of the written lost",
			st.firedTotal, h.events, queued, st.parkedTotal, st.droppedTotal, st.lostTotal)
	}
}

// scan checks the output fs's session got since the last scan.
func (h *fzHarness) scan(fs *fzSession) {
	out := fs.s.out
	if len(out) < fs.scanned {
		if !fs.s.closed { // a closed session's output is discarded
			h.fail("session %d: output shrank from %d to %d bytes", fs.s.id, fs.scanned, len(out))
		}
		fs.scanned = len(out)
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
			v, err := protocol.DecodeUints(m.Result, nil)
			if err != nil || len(v) != 3 {
				h.fail("session %d: bind result %v %v", fs.s.id, v, err)
			}
			if _, ok := fs.seqs[p.receiver]; !ok {
				fs.seqs[p.receiver] = 0
			}
			fs.acked[p.receiver] = p.ack
			// The backlog follows from first_seq: again, in acknowledged
			// mode or as it ends, if it was sent before.
			fs.seqs[p.receiver] = v[2] - 1
			if r := h.record(p.receiver); r != nil {
				h.seqs[r] = v[2] - 1
			}
		case p.op == protocol.OpUnbind:
			delete(fs.seqs, p.receiver)
			delete(fs.acked, p.receiver)
		}
	case protocol.KindFire:
		h.fire(fs, &m.Fire)
	case protocol.KindTakeover:
		if _, ok := fs.seqs[m.Receiver]; !ok {
			h.fail("session %d: takeover of receiver %d, which it does not hold", fs.s.id, m.Receiver)
		}
		delete(fs.seqs, m.Receiver)
		delete(fs.acked, m.Receiver)
	case protocol.KindDropped:
		h.dropped(fs, m)
	default:
		h.fail("session %d: message kind %s", fs.s.id, m.Kind)
	}
}

func (h *fzHarness) fire(fs *fzSession, f *protocol.Fire) {
	last, ok := fs.seqs[f.Receiver]
	switch {
	case !ok:
		h.fail("session %d: event of receiver %d, which it does not hold", fs.s.id, f.Receiver)
	case f.Seq <= last:
		h.fail("session %d: receiver %d: seq %d after %d", fs.s.id, f.Receiver, f.Seq, last)
	}
	if fs.acked[f.Receiver] && f.Seq != last+1 {
		h.fail("session %d: receiver %d in acknowledged mode: seq %d after %d", fs.s.id, f.Receiver, f.Seq, last)
	}
	fs.seqs[f.Receiver] = f.Seq
	r := h.record(f.Receiver)
	if r == nil {
		h.fail("event of receiver %d, which has no record", f.Receiver)
	}
	if f.Seq <= h.seqs[r] {
		h.fail("receiver %d: seq %d left the server after %d", f.Receiver, f.Seq, h.seqs[r])
	}
	h.seqs[r] = f.Seq
	if f.Seq > h.high[r] { // not a redelivery
		h.high[r] = f.Seq
		h.events++
	}
}

// unsent counts the events in backlogs and outboxes that were never
// written out.
func (h *fzHarness) unsent() uint64 {
	var n uint64
	for _, r := range h.c.receivers {
		for i := range r.n {
			if r.firstSeq()+uint64(i) > h.high[r] {
				n++
			}
		}
	}
	return n
}

// record returns the record an event of receiver came from: the one the
// call ended with, or began with if it forgot it.
func (h *fzHarness) record(receiver uint64) *receiver {
	r := h.c.receivers[receiver]
	if r == nil && receiver < fzReceivers {
		r = h.before[receiver]
	}
	return r
}

// dropped checks a dropped notice: it names a receiver the session holds,
// not in acknowledged mode, and events after the last it got; the next
// event comes after them.
func (h *fzHarness) dropped(fs *fzSession, m *protocol.Message) {
	last, ok := fs.seqs[m.Receiver]
	switch {
	case !ok:
		h.fail("session %d: dropped notice of receiver %d, which it does not hold", fs.s.id, m.Receiver)
	case fs.acked[m.Receiver]:
		h.fail("session %d: dropped notice of receiver %d, in acknowledged mode", fs.s.id, m.Receiver)
	case m.First <= last || m.Last < m.First:
		h.fail("session %d: receiver %d: dropped %d..%d after %d", fs.s.id, m.Receiver, m.First, m.Last, last)
	}
	fs.seqs[m.Receiver] = m.Last
	if r := h.record(m.Receiver); r != nil {
		h.seqs[r] = max(h.seqs[r], m.Last)
	}
}

// flush plays Server.flush: Flush hands each dirty session's output (the
// harness has checked it already) to a writer that plays its connection:
// a write to a reset peer closes the session inside the flush, a stuck
// peer's connection buffers what it is handed. A session marked kill is
// closed after its write.
func (h *fzHarness) flush() {
	for _, s := range h.c.dirty {
		if fs := h.of[s]; fs.scanned != len(s.out) {
			h.fail("session %d: output not checked", s.id)
		}
	}
	write := func(s *Session, out []byte) int {
		fs := h.of[s]
		h.rep.wrote(s, out)
		if len(out) != fs.scanned && !s.closed {
			h.fail("session %d: %d bytes written, %d checked", s.id, len(out), fs.scanned)
		}
		fs.scanned = 0
		switch {
		case len(out) == 0:
		case fs.conn.reset:
			h.call(func() { h.c.Close(s, fs.conn.buffered) })
		case fs.conn.stuck:
			fs.conn.buffered += len(out)
		}
		return fs.conn.buffered
	}
	h.c.Flush(write, func(s *Session) {
		if s.kill {
			h.call(func() { h.c.Close(s, h.of[s].conn.buffered) })
		}
	})
	h.rep.sync()
}

// endTurn plays the end of a turn — the pump, then the flush — frees the
// slots of closed sessions, and reads on where the glue would wake a
// session (its held frames may be read now), until no session wakes.
func (h *fzHarness) endTurn() {
	for range 1000 {
		h.call(func() { h.c.PumpAll(func(s *Session) int { return h.of[s].conn.buffered }) })
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
		h.call(func() {
			more = h.c.Advance(h.now, h.maxFires)
			more = h.c.More() || more // a fast-forward's first turn left work
		})
		h.rep.sync()
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
	h.rep.check(fzReceiverIDs)
	h.checkSnapshot()
	for _, fs := range h.slots {
		if fs != nil && !fs.s.kill && (len(fs.pending) > 0 || len(fs.held) > 0 || fs.s.blocked) {
			h.fail("session %d: %d requests unanswered, %d unread, blocked %v", fs.s.id, len(fs.pending), len(fs.held), fs.s.blocked)
		}
	}
	for id, r := range h.c.receivers {
		if r.owner != nil && (r.unsent() > 0 || r.parked.len() > 0 && h.fits(r)) {
			h.fail("receiver %d: %d events never delivered to session %d (%d parked, with room)", id, r.unsent(), r.owner.id, r.parked.len())
		}
	}
}

// fits reports whether r's first waiting firing would fit in its outbox
// now: then nothing may hold it back any more.
func (h *fzHarness) fits(r *receiver) bool {
	p := r.parked.front()
	ev := protocol.Fire{Receiver: r.id, Tid: p.tid, Tick: p.tick, Fired: p.fired, Repeat: p.repeat, Last: p.last,
		Data: p.data, Seq: r.seq + 1, Late: h.c.lateSince(p.from)}
	return h.c.outboxFits(r, len(protocol.AppendFire(nil, &ev)))
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

var fzReceiverIDs = []uint64{0, 1, 2, 3, 4}

func (h *fzHarness) checkReceivers() {
	st := h.c
	backlog, outbox, parked := 0, 0, 0
	if len(st.recvList) != len(st.receivers) {
		h.fail("%d receiver records listed, %d filed", len(st.recvList), len(st.receivers))
	}
	for i, r := range st.recvList {
		if st.receivers[r.id] != r || r.listed != i {
			h.fail("receiver %d listed at %d (it says %d) is not the one filed", r.id, i, r.listed)
		}
	}
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
		case o != nil && r.unsent() > 0 && (r.queuedIn != o || !o.stalled):
			h.fail("receiver %d: %d events held for session %d, which will not pump them", id, r.unsent(), o.id)
		case r.sent < 0 || r.sent > r.n || (o == nil || !r.acked) && r.sent != 0:
			h.fail("receiver %d: %d of %d events sent (acked %v, bound %v)", id, r.sent, r.n, r.acked, o != nil)
		case !r.acked && (r.parked.len() > 0 || r.holding != nil):
			h.fail("receiver %d: %d firings parked, %d timers held, not in acknowledged mode", id, r.parked.len(), len(r.holding))
		case o == nil && !r.acked && r.n == 0 && r.dropped == 0 && r.parked.len() == 0 && st.wheel.ReceiverLen(id) == 0:
			h.fail("receiver %d: idle but not forgotten", id)
		case o == nil && r.acked && r.n == 0 && r.dropped == 0 && r.parked.len() == 0 && st.wheel.ReceiverLen(id) == 0 && !r.inIdle:
			h.fail("receiver %d: idle in acknowledged mode but not retained", id)
		case o != nil && r.inIdle:
			h.fail("receiver %d: bound but on the retained list", id)
		}
		// (Outboxes and backlogs may pass their bounds when a bind changes
		// the mode: a backlog becomes an outbox whole, an outbox and its
		// parked firings become a backlog whole.)
		backlog += r.n
		if r.acked {
			outbox += r.n
		}
		parked += r.parked.len()
	}
	retained := 0
	for r := st.idleHead; r != nil; r = r.idleNext {
		if st.receivers[r.id] != r || !r.inIdle || !r.acked || r.idleNext != nil && r.idleNext.idlePrev != r || r.idleNext == nil && st.idleTail != r ||
			r.idleNext != nil && r.idleNext.idleAt < r.idleAt || retained > len(st.receivers) {
			h.fail("receiver %d: retained list broken (filed %v, acked %v, idle at %d)", r.id, st.receivers[r.id] == r, r.acked, r.idleAt)
			break
		}
		retained++
	}
	if retained != st.idleN {
		h.fail("retained list holds %d receivers, counted %d", retained, st.idleN)
	}
	listed := map[*receiver]bool{}
	for _, r := range st.waiting {
		if listed[r] || r.parked.len() == 0 || st.receivers[r.id] != r {
			h.fail("receiver %d listed as waiting: twice %v, %d parked, filed %v", r.id, listed[r], r.parked.len(), st.receivers[r.id] == r)
		}
		listed[r] = true
	}
	for _, r := range st.receivers {
		if r.parked.len() > 0 && !listed[r] {
			h.fail("receiver %d has %d parked firings and is not listed as waiting", r.id, r.parked.len())
		}
	}
	if uint64(parked) != st.parkedTotal {
		h.fail("receivers hold %d parked firings, parked_total says %d", parked, st.parkedTotal)
	}
	if uint64(backlog) != st.backlogEvents || uint64(outbox) != st.outboxEvents {
		h.fail("backlogs hold %d events, backlog_events says %d; outboxes %d, outbox_events %d", backlog, st.backlogEvents, outbox, st.outboxEvents)
	}
	for _, r := range st.recvCache {
		if r != nil && st.receivers[r.id] != r {
			h.fail("receiver cache: a stale record of receiver %d", r.id)
		}
	}
}

func (h *fzHarness) checkSessions() {
	st := h.c
	for id, s := range st.sessions {
		for rid := range s.receivers {
			if r := st.receivers[rid]; r == nil || r.owner != s {
				h.fail("session %d lists receiver %d, which it does not own", id, rid)
			}
		}
		if s.id != id || s.closed || len(s.receivers) > h.limits.MaxReceiversPerSession {
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
		case s.s.waiting && !slices.ContainsFunc(st.waiters, func(w waiter) bool { return w.s == s.s }) &&
			!slices.ContainsFunc(st.bulk, func(op *bulkOp) bool { return op.s == s.s }):
			h.fail("session %d: waiting for no fast-forward and no bulk operation", s.s.id)
		case !s.s.closed && (s.s.blocked || len(s.s.queue) > 0) && !s.s.stalled && !(s.s.quiet() && s.s.draining):
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
	st, l := h.c, h.limits
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
	for k := range st.sched.plans {
		if _, err := st.wheel.Get(k); err != nil {
			h.fail("timer %v is gone, its plan stays", k)
		}
	}
	h.checkGroups()
}

// checkGroups compares the groups with the model (the group each live
// timer's add gave it) and checks the group table's links and counts, and
// that every bulk operation's cursor is a member of its group.
func (h *fzHarness) checkGroups() {
	st, t := h.c, &h.c.groups
	for k := range h.timers {
		if _, err := st.wheel.Get(k); err == nil && t.groupOf(k) != h.groups[k] {
			h.fail("timer %v in group %d, its add said %d", k, t.groupOf(k), h.groups[k])
		}
	}
	members, paused := 0, 0
	for g, gr := range t.groups {
		if gr.paused {
			paused++
		}
		n, recv, prev := 0, map[uint64]int{}, uint32(0)
		for i := gr.head; i != 0; i = t.nodes[i].next {
			m := t.nodes[i]
			if _, err := st.wheel.Get(m.key); err != nil || m.group != g || m.prev != prev || t.member(m.key) != i {
				h.fail("group %d: member %d (%v) is gone from the wheel, in another group, or mislinked", g, i, m.key)
			}
			prev = i
			n++
			recv[m.key.Receiver]++
		}
		if n != gr.count || prev != gr.tail || n == 0 && !gr.paused || !maps.Equal(recv, gr.recv) {
			h.fail("group %d: %d members, count %d, tail %d/%d, receivers %v/%v", g, n, gr.count, prev, gr.tail, recv, gr.recv)
		}
		members += n
	}
	if paused != t.pausedGroups {
		h.fail("%d groups paused, %d counted", paused, t.pausedGroups)
	}
	if members != t.of.count {
		h.fail("%d group members, %d indexed", members, t.of.count)
	}
	for _, op := range st.bulk {
		for _, i := range []uint32{op.cur, op.end} {
			if op.group != 0 && op.cur != 0 && (i == 0 || t.nodes[i].group != op.group) {
				h.fail("bulk %s of group %d: cursor %d/%d off the group", op.op, op.group, op.cur, op.end)
			}
		}
	}
}

// checkSnapshot restores a snapshot of the state and checks that the
// restored Core snapshots to the same bytes.
func (h *fzHarness) checkSnapshot() {
	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		b, _ := snap.AppendNext(nil, 0)
		return b
	}
	data := encode(h.c)
	r, err := Restore(h.c.cfg, data, nil, nil)
	if err != nil {
		h.fail("restore: %v", err)
	}
	if !bytes.Equal(data, encode(r)) {
		h.fail("the restored state snapshots differently")
	}
	if r.parkedTotal != h.c.parkedTotal || r.parkedBytes != h.c.parkedBytes || r.backlogEvents != h.c.backlogEvents ||
		r.outboxEvents != h.c.outboxEvents || r.outboxBytes != h.c.outboxBytes || r.backlogBytes != h.c.backlogBytes ||
		r.backlogHeld != h.c.backlogHeld || r.outboxHeld != h.c.outboxHeld || r.inflightBytes != h.c.inflightBytes {
		h.fail("restored totals differ: parked %d/%d bytes %d/%d backlog %d/%d", r.parkedTotal, h.c.parkedTotal,
			r.parkedBytes, h.c.parkedBytes, r.backlogEvents, h.c.backlogEvents)
	}
}
