package session

import (
	"fmt"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Acknowledged mode. A receiver bound with ack keeps every event in its
// outbox — the backlog's byte queue, holding events already handed to the
// session as well as those not yet sent — until an ack covers its sequence
// number:
//
//   - An event of an outbox counts as a reply to a recorded input (see
//     TakeRecord): with fsync always it leaves only once the record of
//     the turn it fired in is on disk, so a crash of the machine cannot
//     undo a firing a client has seen (and reuse its seq).
//   - The outbox holds consecutive sequence numbers, r.seq-r.n+1 through
//     r.seq; its first r.sent events have been handed to the owner's
//     connection since it bound (the queue's cursor is at the next one). An
//     ack pops events from the front.
//   - Closing the session, unbinding, or a takeover sets r.sent to 0: the
//     next bind delivers the outbox again from its first event.
//   - The outbox is bounded by max_outbox and max_outbox_bytes per
//     receiver, and max_outbox_total and max_outbox_bytes_total for all
//     outboxes together (apart from the backlogs of receivers not in
//     acknowledged mode, which drop their oldest events). When an event
//     does not fit, nothing is dropped: the firing waits ("parks") with its
//     receiver, unnumbered, and later firings of the receiver queue behind
//     it. A repeating timer whose firing parks is paused by the server at
//     once (it is "held"), so it adds no more. As acks make room — for
//     the acked receiver, and for the receivers held back by the totals
//     (Core.waiting), in the order their waits began — parked firings
//     enter the outbox in order, numbered then and reported late by the
//     ticks they were late when they fired plus every tick of tw-time they
//     waited (clock or fast-forward: parked.from), and held timers resume with their full interval. Parked firings count as timers of their receiver for
//     max_timers and max_timers_per_receiver, so the timer limits bound
//     them.
//   - An idle receiver in acknowledged mode is retained (forgetIfIdle,
//     retain.go) for ack_retention_ticks: the mode and the count hold
//     until then or until a bind without ack ends them; a bind with ack
//     after it was forgotten moves its count past any seq it gave.

// parked is a firing waiting for room in its receiver's outbox. from is
// the tick its late counts from (see lateFrom): its event reports every
// tick of tw-time from there to the moment it enters the outbox.
type parked struct {
	tid, tick, fired, repeat uint64
	from                     uint64
	last                     bool
	data                     []byte // owned
}

// unsent returns how many of r's backlog events have not been handed to its
// owner: all of them, except in acknowledged mode.
func (r *receiver) unsent() int { return r.n - r.sent }

// firstSeq returns the sequence number of the first event in r's backlog,
// or the next one when it is empty.
func (r *receiver) firstSeq() uint64 { return r.seq - uint64(r.n) + 1 }

// outboxFits reports whether an event of size bytes fits in r's outbox.
// One event always fits an empty outbox, whatever the per-receiver bounds.
func (c *Core) outboxFits(r *receiver, size int) bool {
	l := &c.limits
	if r.n > 0 && (r.n >= l.MaxOutbox || r.bytes+size > l.MaxOutboxBytes) {
		return false
	}
	return c.outboxEvents < uint64(l.MaxOutboxTotal) && c.outboxBytes+uint64(size) <= uint64(l.MaxOutboxBytesTotal)
}

// fireAcked routes a firing of a receiver in acknowledged mode: into its
// outbox, and on to its owner when nothing unsent is ahead of it and the
// session has room; or, when the outbox is full or firings already wait,
// to the parked firings. overdue adds to its late (see planFire).
func (c *Core) fireAcked(r *receiver, f *wheel.Fire, overdue uint64) {
	if r.parked.len() == 0 {
		ev := &c.fireBuf
		ev.Receiver, ev.Tid, ev.Tick, ev.Fired = f.Receiver, f.Tid, f.Tick, f.Fired
		ev.Repeat, ev.Last, ev.Data, ev.Seq = uint64(f.Repeat), f.Last, f.Data, r.seq+1
		ev.Late = c.late(f.Tick) + overdue
		c.scratch = protocol.AppendFire(c.scratch[:0], ev)
		if c.outboxFits(r, len(c.scratch)) {
			r.seq++
			c.enterOutbox(r, c.scratch)
			return
		}
	}
	if r.parked.len() == 0 {
		c.listWaiting(r)
	}
	r.parked.push(parked{tid: f.Tid, tick: f.Tick, fired: f.Fired, repeat: uint64(f.Repeat),
		from: c.lateFrom(f.Tick) - min(overdue, c.lateFrom(f.Tick)), last: f.Last, data: append([]byte(nil), f.Data...)})
	c.parkedTotal++
	c.parkedBytes += uint64(len(f.Data))
	if !f.Last { // paused at once (the wheel allows it from its callback): it fires no more meanwhile
		c.holdTimer(wheel.Key{Receiver: r.id, Tid: f.Tid}, r)
	}
}

// late returns how many ticks a firing due at tick, firing now, is late.
func (c *Core) late(tick uint64) uint64 { return c.lateSince(c.lateFrom(tick)) }

// lateFrom returns the tick from which a firing due at tick, firing now,
// counts as late: its due tick, or tw-time now when a fast-forward jumped
// over its due tick (the ticks jumped over were asked for at once). A
// firing that then waits for room in an outbox keeps it, so its event
// counts every tick of tw-time it waited, by the clock or by later
// fast-forwards alike.
func (c *Core) lateFrom(tick uint64) uint64 {
	if tick <= c.skipped {
		return c.target
	}
	return tick
}

// lateSince returns the ticks from tick from to tw-time (0 when from is not
// before it).
func (c *Core) lateSince(from uint64) uint64 { return c.target - min(from, c.target) }

// enterOutbox appends frame, r's newest event, to its outbox and hands it
// to the owner, or holds it for the owner's next top-up.
func (c *Core) enterOutbox(r *receiver, frame []byte) {
	c.appendBacklog(r, frame)
	s := r.owner
	if s == nil {
		return
	}
	if r.sent == r.n-1 && c.room(s, c.pending(s)) {
		at := len(s.out)
		s.out = append(s.out, r.q.next()...) // the frame just queued
		r.sent++
		r.high = max(r.high, r.seq)
		c.noteReplied(s, at)
		c.markDirty(s)
		return
	}
	c.hold(s, r)
}

// holdTimer pauses the repeating timer k whose firing just parked, and
// notes it held: the server resumes it when that firing goes out.
func (c *Core) holdTimer(k wheel.Key, r *receiver) {
	if c.wheel.Pause(k) != nil {
		return
	}
	if r.holding == nil {
		r.holding = make(map[uint64]struct{})
	}
	r.holding[k.Tid] = struct{}{}
}

// unhold gives timer k back to its user before a request changes it: the
// server no longer resumes it when its parked firing goes out. It reports
// whether the server was holding it (paused).
func (c *Core) unhold(k wheel.Key) bool {
	if c.parkedTotal == 0 { // a held timer has a parked firing
		return false
	}
	r := c.receivers[k.Receiver]
	if r == nil || r.holding == nil {
		return false
	}
	if _, ok := r.holding[k.Tid]; !ok {
		return false
	}
	delete(r.holding, k.Tid)
	if len(r.holding) == 0 {
		r.holding = nil
	}
	return true
}

// refill moves r's parked firings into its outbox while they fit, oldest
// first, numbering them now and resuming the timers held for them.
func (c *Core) refill(r *receiver) {
	for r.parked.len() > 0 {
		p := r.parked.front()
		ev := &c.fireBuf
		ev.Receiver, ev.Tid, ev.Tick, ev.Fired = r.id, p.tid, p.tick, p.fired
		ev.Repeat, ev.Last, ev.Data, ev.Seq = p.repeat, p.last, p.data, r.seq+1
		ev.Late = c.lateSince(p.from) // how late it fired, plus the ticks it waited
		c.scratch = protocol.AppendFire(c.scratch[:0], ev)
		if r.acked && !c.outboxFits(r, len(c.scratch)) {
			return
		}
		r.seq++
		if r.acked {
			c.enterOutbox(r, c.scratch)
		} else { // acknowledged mode ended: keep them all, over the bounds for once
			c.appendBacklog(r, c.scratch)
		}
		if k := (wheel.Key{Receiver: r.id, Tid: p.tid}); !p.last && c.unhold(k) {
			if c.wheel.Resume(k) == nil { // ErrOverflow: it stays paused
				c.planResumed(k) // a cron timer: on schedule
			}
		}
		c.parkedTotal--
		c.parkedBytes -= uint64(len(p.data))
		r.parked.pop()
		if r.parked.len() == 0 {
			c.unlistWaiting(r)
		}
	}
}

// listWaiting notes r, whose first firing just parked, at the end of the
// receivers with waiting firings: when the outbox totals free room, they
// are refilled in that order (see refillWaiting).
func (c *Core) listWaiting(r *receiver) { c.waiting = append(c.waiting, r) }

// unlistWaiting takes r, which has no waiting firing any more, off the list.
func (c *Core) unlistWaiting(r *receiver) {
	for i, w := range c.waiting {
		if w == r {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			return
		}
	}
}

// refillWaiting lets the waiting firings of every receiver in, in the
// order their waits began, while the outbox totals have room: a receiver
// held back by the totals (not by its own outbox) has no ack of its own to
// wake it.
func (c *Core) refillWaiting() {
	l := &c.limits
	for i := 0; i < len(c.waiting); {
		if c.outboxEvents >= uint64(l.MaxOutboxTotal) || c.outboxBytes >= uint64(l.MaxOutboxBytesTotal) {
			return
		}
		r := c.waiting[i]
		c.refill(r) // unlists r when it drains
		if i < len(c.waiting) && c.waiting[i] == r {
			i++
		}
	}
}

// ack handles ack: the session has handled every event of the receiver up
// to req.Seq. It pops them from the outbox and lets parked firings in.
func (c *Core) ack(s *Session, req *protocol.Request) {
	if _, ok := s.receivers[req.Receiver]; !ok {
		c.fail(s, req.ID, protocol.CodeNotFound, fmt.Sprintf("receiver %d is not bound by this session", req.Receiver))
		return
	}
	r := c.receivers[req.Receiver]
	if !r.acked {
		c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("receiver %d is not bound in acknowledged mode", req.Receiver))
		return
	}
	first := r.firstSeq()
	lastSent := first + uint64(r.sent) - 1
	if req.Seq > lastSent {
		c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("ack %d of receiver %d is past the last event delivered to this session (%d)", req.Seq, req.Receiver, lastSent))
		return
	}
	for seq := first; seq <= req.Seq; seq++ {
		c.popBacklog(r)
		r.sent--
	}
	c.ok(s, req.ID)
	c.refill(r)
	if c.parkedTotal > 0 {
		c.refillWaiting()
	}
}

// bindMode sets r's delivery mode for a bind by s: acknowledged or not.
// Either way the backlog is delivered from its first event. Binding
// without ack ends acknowledged mode: the parked firings join the backlog
// (numbered now; kept even past its bounds, which the next firings
// restore by dropping the oldest) and held timers resume. Binding with
// ack a receiver with nothing pending moves its sequence numbers past any
// it had before it was forgotten (see bind).
func (c *Core) bindMode(r *receiver, ack bool) {
	r.sent = 0
	r.q.rewind()
	switch {
	case ack:
		if !r.acked { // the backlog becomes the outbox
			c.renumber(r)
			r.acked = true
			c.outboxEvents += uint64(r.n)
			c.outboxBytes += uint64(r.bytes)
			c.outboxHeld += uint64(r.q.held)
		}
		if r.n == 0 && r.parked.len() == 0 {
			r.seq = max(r.seq, c.firedTotal)
		}
		c.refill(r) // the limits may have changed since its firings began to wait
	case r.acked:
		r.acked = false
		c.outboxEvents -= uint64(r.n)
		c.outboxBytes -= uint64(r.bytes)
		c.outboxHeld -= uint64(r.q.held)
		c.refill(r)
		for _, tid := range sortedKeys(r.holding) { // parked firings were all numbered above
			if k := (wheel.Key{Receiver: r.id, Tid: tid}); c.wheel.Resume(k) == nil {
				c.planResumed(k)
			}
		}
		r.holding = nil
		c.refillWaiting() // its outbox's room is everybody's
	}
}

// giveUp drops r's oldest backlog event for good, counting it as dropped,
// and as lost if a connection was handed it (see receiver.high).
func (c *Core) giveUp(r *receiver) {
	if r.firstSeq() <= r.high {
		c.lostTotal++
	}
	c.popBacklog(r)
	c.droppedTotal++
}

// endAcked takes r, whose outbox is empty and nothing parked, out of
// acknowledged mode.
func (c *Core) endAcked(r *receiver) {
	r.acked, r.sent = false, 0
	r.q.rewind()
}

// releaseAcked ends r's delivery to its owner, which unbinds it or closes:
// the outbox will go out again from its first event at the next bind.
func (r *receiver) releaseAcked() {
	if r.acked {
		r.sent = 0
		r.q.rewind()
	}
}

// dropParked forgets r's parked firings and held timers (an ephemeral
// receiver's session ended), counting the firings as dropped.
func (c *Core) dropParked(r *receiver) {
	for _, p := range r.parked.all() {
		c.parkedBytes -= uint64(len(p.data))
	}
	if r.parked.len() > 0 {
		c.unlistWaiting(r)
	}
	c.droppedTotal += uint64(r.parked.len())
	c.parkedTotal -= uint64(r.parked.len())
	r.parked, r.holding = parkQueue{}, nil
}
