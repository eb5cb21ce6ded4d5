package session

import (
	"fmt"
	"unsafe"

	"github.com/tickwheel/tickwheel/protocol"
)

// Retention of idle receivers in acknowledged mode.
//
// A receiver with nothing pending — unbound, no backlog or outbox, no
// parked firing, no drop to report, no timer — is forgotten at once
// (forgetIfIdle), unless it is in acknowledged mode: then its record is
// retained, so that timers added for it while it is unbound fire in that
// mode (into an outbox, never dropped), for ack_retention_ticks ticks of
// tw-time after it became idle. It is forgotten then, or earlier when a
// bind needs a new record while max_receivers records exist (the longest
// idle goes first). Forgetting it breaks no promise about sequence
// numbers: a bind with ack of a receiver with nothing pending moves its
// seq up to the Core's firing count (bindMode), past any seq the
// forgotten record gave.
//
// The retained receivers are an intrusive list, oldest idle first
// (Core.idleHead). A receiver goes to its back each time it becomes idle;
// one that became busy again (a bind unlinks it; a timer added while it
// is unbound does not touch the record) stays listed until it reaches the
// front, where it is unlinked. Expiry runs in Advance, at most
// maxExpirePerAdvance records a call, so a flood that expires at once is
// forgotten over a few turns. All of it is state: it depends on tw-time
// and the inputs only, and the snapshot keeps the list in order.

// maxExpirePerAdvance bounds the idle receivers one Advance forgets.
const maxExpirePerAdvance = 4096

// receiverRecordBytes is an estimate of the memory a receiver record takes
// beyond its events and parked firings: the struct, its map entry, its
// place in recvList and cache share, and the copy snapshots keep of it
// (receiverSnaps: the record's and two references). Stats and metrics
// report records × it.
const receiverRecordBytes = int(unsafe.Sizeof(receiver{})) + 56 + int(unsafe.Sizeof(receiverSnap{})) + 16

// idleNow reports whether r has nothing pending and no owner: forgetting
// it (or retaining it, in acknowledged mode) loses nothing.
func (c *Core) idleNow(r *receiver) bool {
	return r.owner == nil && r.n == 0 && r.dropped == 0 && r.parked.len() == 0 && c.wheel.ReceiverLen(r.id) == 0
}

// addReceiver adds r's record (new).
func (c *Core) addReceiver(r *receiver) {
	c.receivers[r.id] = r
	r.listed = len(c.recvList)
	c.recvList = append(c.recvList, r)
}

// forget drops r's record (noting its seq in forgotSeq if it is in
// acknowledged mode).
func (c *Core) forget(r *receiver) {
	if r.acked {
		c.forgotSeq = max(c.forgotSeq, r.seq)
	}
	c.unlinkIdle(r)
	delete(c.receivers, r.id)
	last := c.recvList[len(c.recvList)-1] // (swap-remove: the order is not the ids')
	c.recvList[r.listed], last.listed = last, r.listed
	c.recvList[len(c.recvList)-1] = nil
	c.recvList = c.recvList[:len(c.recvList)-1]
	if slot := &c.recvCache[recvSlot(r.id)]; *slot == r {
		*slot = nil
	}
}

// retain notes that r, idle in acknowledged mode, became idle now: it goes
// to the back of the retained list.
func (c *Core) retain(r *receiver) {
	c.unlinkIdle(r)
	r.idleAt = c.target
	c.linkIdle(r)
}

// linkIdle appends r to the retained list.
func (c *Core) linkIdle(r *receiver) {
	r.inIdle = true
	r.idlePrev, r.idleNext = c.idleTail, nil
	if c.idleTail != nil {
		c.idleTail.idleNext = r
	} else {
		c.idleHead = r
	}
	c.idleTail = r
	c.idleN++
}

// unlinkIdle takes r off the retained list, if it is on it.
func (c *Core) unlinkIdle(r *receiver) {
	if !r.inIdle {
		return
	}
	if r.idlePrev != nil {
		r.idlePrev.idleNext = r.idleNext
	} else {
		c.idleHead = r.idleNext
	}
	if r.idleNext != nil {
		r.idleNext.idlePrev = r.idlePrev
	} else {
		c.idleTail = r.idlePrev
	}
	r.idlePrev, r.idleNext, r.inIdle = nil, nil, false
	c.idleN--
}

// expireIdle forgets the retained receivers idle for ack_retention_ticks
// ticks or more as of tw-time's target, at most maxExpirePerAdvance of
// them (the rest go at the next Advance), and unlinks those found busy.
func (c *Core) expireIdle() {
	ret := uint64(c.limits.AckRetentionTicks)
	for n := 0; c.idleHead != nil && n < maxExpirePerAdvance; n++ {
		r := c.idleHead
		if due := r.idleAt + ret; due < r.idleAt || due > c.target { // not yet (or never: past 2^64)
			return
		}
		c.unlinkIdle(r)
		if r.acked && c.idleNow(r) {
			c.forget(r)
		}
	}
}

// expiryDue reports whether an Advance to target would forget (or unlink)
// a retained receiver. Such an advance changes state, so it is recorded
// as it runs, not lazily: the lazy record stands for many advances by one
// to the last target, which forgets at most maxExpirePerAdvance where the
// advances it stands for forgot that many each.
func (c *Core) expiryDue(target uint64) bool {
	r := c.idleHead
	if r == nil {
		return false
	}
	due := r.idleAt + uint64(c.limits.AckRetentionTicks)
	return due >= r.idleAt && due <= target
}

// evictIdle forgets the longest-idle retained receiver, to make room for a
// new record at max_receivers. It reports whether there was one.
func (c *Core) evictIdle() bool {
	for c.idleHead != nil {
		r := c.idleHead
		c.unlinkIdle(r)
		if r.acked && c.idleNow(r) {
			c.forget(r)
			return true
		}
	}
	return false
}

// roomForReceiver reports whether a bind by s may make a record for
// receiver id, forgetting an idle one to stay within max_receivers if it
// must; when not, it replies limit_exceeded to request reqID.
func (c *Core) roomForReceiver(s *Session, reqID, id uint64) bool {
	if _, ok := c.receivers[id]; ok || len(c.receivers) < c.limits.MaxReceivers || c.evictIdle() {
		return true
	}
	c.fail(s, reqID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_receivers (%d) reached: every receiver record is in use", c.limits.MaxReceivers))
	return false
}

// RetainedReceivers returns how many idle receivers in acknowledged mode
// are retained (see retain), busy ones not yet unlinked included.
func (c *Core) RetainedReceivers() int { return c.idleN }

// ReceiverBytes returns an estimate of the memory receiver records take,
// their events and parked firings apart (backlog and parked counters).
func (c *Core) ReceiverBytes() uint64 { return uint64(len(c.receivers) * receiverRecordBytes) }

// appendIdle appends the retained list, oldest first, with each record's
// idle tick (snapshot version 5).
func (c *Core) appendIdle(e *encoder) {
	e.int(c.idleN)
	for r := c.idleHead; r != nil; r = r.idleNext {
		e.uv(r.id)
		e.uv(r.idleAt)
	}
}

// idleRef is a retained-list entry read from a snapshot, linked once the
// receivers are restored.
type idleRef struct{ id, at uint64 }

// readIdle reads what appendIdle wrote.
func readIdle(d *decoder) []idleRef {
	var out []idleRef
	for range d.count() {
		out = append(out, idleRef{id: d.uv(), at: d.uv()})
	}
	return out
}

// linkRestored links the retained list read from a snapshot.
func (c *Core) linkRestored(d *decoder, refs []idleRef) {
	for _, ref := range refs {
		r := c.receivers[ref.id]
		if r == nil || r.inIdle || !r.acked {
			d.fail(fmt.Errorf("receiver %d listed as retained is unknown, listed twice or not in acknowledged mode", ref.id))
			return
		}
		r.idleAt = ref.at
		c.linkIdle(r)
	}
}

// retainLegacy lists, after restoring a snapshot older than version 5
// (which kept idle receivers in acknowledged mode for ever), those it
// holds, by id, as idle since tw-time's target.
func (c *Core) retainLegacy() {
	for _, id := range sortedKeys(c.receivers) {
		if r := c.receivers[id]; r.acked && c.idleNow(r) {
			c.retain(r)
		}
	}
}

// renumber gives the events queued in r's plain-mode backlog, which a bind
// with ack is about to make its outbox, seqs past forgotSeq when the first
// of them is at or below it. A receiver in acknowledged mode that
// retention forgot and that got timers again while unbound has a new
// record, numbered from 1 again in plain mode; without this the bind
// would hand its events out under seqs the client acknowledged before, and
// the client's duplicate check would drop them. forgotSeq is the highest
// seq of any forgotten record (the record of r's is gone), so a receiver
// never forgotten may be numbered again too, after one that was: its seqs
// jump forward at the bind, as the protocol allows (first_seq says where
// they go on; no event is missing). The backlog of a plain-mode receiver
// was never handed to a connection (plain mode hands an event over as it
// leaves the backlog), so no client saw the old numbers. The frames are
// re-encoded (a seq's length may change) and pushed again, with their
// counts.
func (c *Core) renumber(r *receiver) {
	n := uint64(r.n)
	if n == 0 || r.firstSeq() > c.forgotSeq {
		return
	}
	base := c.forgotSeq
	var m protocol.Message
	for i := uint64(1); i <= n; i++ {
		frame := c.popBacklog(r)
		if err := protocol.DecodeMessage(frame[4:], &m); err != nil || m.Kind != protocol.KindFire {
			panic(fmt.Sprintf("session: receiver %d's backlog holds a frame that is not an event: %v", r.id, err))
		}
		m.Fire.Seq = base + i
		c.scratch = protocol.AppendFire(c.scratch[:0], &m.Fire)
		c.appendBacklog(r, c.scratch)
	}
	r.seq = base + n
	r.q.rewind()
}
