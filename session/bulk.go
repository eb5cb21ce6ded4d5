package session

import (
	"fmt"
	"math"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Bulk operations (issue 27): cancel_all, pause_all and resume_all of a
// receiver's timers, and cancel_group, pause_all and resume_all of a
// group's, one request and one reply each.
//
// A bulk operation covers the timers its receiver or group has when it
// is applied, and none added after (a replace makes a new timer). It is
// done in chunks of at most max_bulk_per_turn timers: the first when the
// request is applied, then one at the start of each Advance (each loop
// turn), so that a million timers never stall the loop; operations run
// one at a time, in the order they were asked for. Each timer it reaches
// is changed exactly as the per-timer request would change it (cancel,
// pause, resume, with the server's holds and calendar plans handled the
// same way). A timer that comes due before the operation reaches it fires
// first (a one-shot one is then gone, a repeating one is covered at its
// next due tick); one it reached does not fire: never both, never
// neither. The reply, [count], leaves once the operation is complete;
// until then its session's next requests are not read (as for a
// fast-forward), so replies keep request order.
//
// Everything it does is decided by recorded inputs (the request, then the
// Advances, which are recorded, never deferred, while one is in progress)
// and by the limits, which are recorded too: a replay, or a replica,
// does the same chunks. A snapshot holds the operations in progress.

// bulkOp is a bulk operation in progress. Owned by the event loop.
type bulkOp struct {
	s  *Session // nil once its session closed: the operation goes on, unanswered (until a retry adopts it)
	id uint64   // the request id, for the reply
	// client is the request's client id while the memory of request ids
	// holds a pending entry for it (requestid.go), which finishBulk fills
	// in; 0: none.
	client uint64
	op     protocol.Op
	// receiver's timers, or group's when group is non-zero.
	receiver, group uint64
	// A group's operation walks the members from cur through end in the
	// group's order (cur 0: done); removals move both (groupRemoved).
	cur, end uint32
	// A receiver's operation pages its timers by tid from from; fin says
	// none is left. skip holds the tids at or past from added since the
	// operation began, which it leaves alone.
	from uint64
	fin  bool
	skip map[uint64]struct{}
	n    uint64 // timers covered so far: the reply's count
}

// done reports whether op has no timer left to reach.
func (op *bulkOp) done() bool {
	if op.group != 0 {
		return op.cur == 0
	}
	return op.fin
}

// startBulk applies a cancel_all, pause_all or resume_all: it checks the
// request, sets the paused mark of the receiver or group (timers added to
// a paused one start paused), queues the operation and runs its first
// chunk when no other is ahead of it.
func (c *Core) startBulk(s *Session, req *protocol.Request) {
	if req.Op == protocol.OpCancelGroup {
		if req.Group == 0 {
			c.fail(s, req.ID, protocol.CodeInvalidArgument, "cancel_group of group 0: group 0 is no group (cancel_all cancels a receiver's timers)")
			return
		}
		req.Op, req.Receiver = protocol.OpCancelAll, 0 // the operation is the same
	}
	if req.Group != 0 && req.Receiver != 0 {
		c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("%s names receiver %d and group %d: give one of them (receiver 0 with a group)", req.Op, req.Receiver, req.Group))
		return
	}
	op := &bulkOp{s: s, id: req.ID, op: req.Op, receiver: req.Receiver, group: req.Group}
	if req.Op == protocol.OpPauseAll && !c.roomForMark(s, req) {
		return
	}
	if req.Group != 0 {
		gr := c.groups.get(req.Group)
		if !c.mayTouchGroup(s, req, gr) {
			return
		}
		if gr != nil {
			op.cur, op.end = gr.head, gr.tail
		}
		switch req.Op {
		case protocol.OpPauseAll:
			c.groups.setPaused(req.Group, true)
		case protocol.OpResumeAll:
			c.groups.setPaused(req.Group, false)
		}
	} else {
		if !c.mayTouch(s, req) {
			return
		}
		switch req.Op {
		case protocol.OpPauseAll:
			c.groups.setRecvPaused(req.Receiver, true)
		case protocol.OpResumeAll:
			c.groups.setRecvPaused(req.Receiver, false)
		}
	}
	c.bulk = append(c.bulk, op)
	if len(c.bulk) == 1 {
		c.stepBulk()
	}
	if len(c.bulk) > 0 && c.bulk[len(c.bulk)-1] == op { // not done yet: the reply waits
		s.waiting = true
		c.more = true
	}
}

// roomForMark refuses a pause_all that would mark one receiver or group
// paused more than max_receivers has marks (each of them: the paused
// receivers, and the paused groups): a mark outlives the timers, so
// without a bound pause_all of ever new ids would grow memory for ever.
func (c *Core) roomForMark(s *Session, req *protocol.Request) bool {
	t, limit := &c.groups, c.limits.MaxReceivers
	switch {
	case req.Group != 0:
		if gr := t.get(req.Group); gr != nil && gr.paused || t.pausedGroups < limit {
			return true
		}
	default:
		if _, ok := t.pausedRecv[req.Receiver]; ok || len(t.pausedRecv) < limit {
			return true
		}
	}
	c.fail(s, req.ID, protocol.CodeLimitExceeded, fmt.Sprintf("limit max_receivers (%d) reached: that many receivers, or groups, are paused; resume_all some", limit))
	return false
}

// mayTouchGroup enforces AddOnlyBound for a bulk operation on group gr (nil:
// no timers): with it, a session may run one only when it has bound every
// receiver with timers in the group, since the operation changes all of
// them; otherwise the request is refused, naming the lowest such receiver
// it has not bound. Without AddOnlyBound every session may.
func (c *Core) mayTouchGroup(s *Session, req *protocol.Request, gr *group) bool {
	if !c.addOnlyBound || gr == nil {
		return true
	}
	missing, found := uint64(0), false
	for r := range gr.recv {
		if _, ok := s.receivers[r]; !ok && (!found || r < missing) {
			missing, found = r, true
		}
	}
	if !found {
		return true
	}
	c.fail(s, req.ID, protocol.CodeUnauthorized, fmt.Sprintf("group %d has timers of receiver %d, which this session has not bound, and the server allows changes only to bound receivers (add_only_bound)", req.Group, missing))
	return false
}

// stepBulk runs the operations in progress, oldest first, for at most
// max_bulk_per_turn timers, and answers those it completes. It asks for
// another turn when work is left.
func (c *Core) stepBulk() {
	budget := c.limits.MaxBulkPerTurn
	for len(c.bulk) > 0 {
		op := c.bulk[0]
		if op.group != 0 {
			budget -= c.stepGroup(op, budget)
		} else {
			budget -= c.stepReceiver(op, budget)
		}
		if !op.done() {
			break
		}
		c.finishBulk(op)
		c.bulk[0] = nil
		c.bulk = c.bulk[1:]
		if budget <= 0 {
			break
		}
	}
	if len(c.bulk) == 0 {
		c.bulk = nil
	} else {
		c.more = true
	}
}

// stepGroup covers at most budget of op's group members and returns how
// many it reached.
func (c *Core) stepGroup(op *bulkOp, budget int) int {
	done := 0
	for ; done < budget && op.cur != 0; done++ {
		i := op.cur
		m := c.groups.nodes[i]
		if i == op.end {
			op.cur = 0
		} else {
			op.cur = m.next
		}
		c.bulkOne(op, m.key, i)
	}
	c.work += done
	return done
}

// stepReceiver covers at most budget of op's receiver's timers, in tid
// order, and returns how many it reached.
func (c *Core) stepReceiver(op *bulkOp, budget int) int {
	done := 0
	for done < budget && !op.fin {
		want := budget - done
		c.listBuf = c.wheel.ListPage(op.receiver, op.from, want, c.listBuf[:0])
		c.work += c.wheel.ListWork()
		tids := c.tidBuf[:0]
		for i := range c.listBuf {
			tids = append(tids, c.listBuf[i].Tid)
		}
		clear(c.listBuf) // (views into the wheel)
		c.tidBuf = tids
		if len(tids) < want {
			op.fin = true
		}
		for _, tid := range tids {
			if tid == math.MaxUint64 {
				op.fin = true
			} else {
				op.from = tid + 1
			}
			done++
			if _, ok := op.skip[tid]; ok {
				delete(op.skip, tid)
				continue
			}
			c.bulkOne(op, wheel.Key{Receiver: op.receiver, Tid: tid}, 0)
		}
	}
	if op.fin {
		op.skip = nil
	}
	return done
}

// bulkOne applies op to timer k as the per-timer request would, counting
// it when it changed. member is k's member node when the caller knows it
// (a group's operation), else 0.
func (c *Core) bulkOne(op *bulkOp, k wheel.Key, member uint32) {
	switch op.op {
	case protocol.OpCancelAll:
		c.unhold(k)
		if c.wheel.Cancel(k) == nil {
			c.dropPlan(k)
			if member != 0 { // (saves the index look-up: a random access into a large table)
				c.groupRemoved(member)
				c.groups.leave(member)
			} else {
				c.forgetGroup(k)
			}
			c.tidy(k.Receiver)
			op.n++
		}
	case protocol.OpPauseAll:
		if c.unhold(k) || c.wheel.Pause(k) == nil { // a server's hold becomes the user's pause
			op.n++
		}
	case protocol.OpResumeAll:
		c.unhold(k)
		if c.wheel.Resume(k) == nil {
			c.planResumed(k)
			op.n++
		}
	}
}

// finishBulk answers a completed operation, and remembers its reply for
// retries when its request id is pending (requestid.go), even when its
// session has closed: a retry then gets that reply.
func (c *Core) finishBulk(op *bulkOp) {
	s := op.s
	if s == nil || s.closed {
		if op.client != 0 {
			c.fillPending(op, protocol.AppendOK(nil, op.id, op.n))
		}
		return
	}
	at := len(s.out)
	s.out = protocol.AppendOK(s.out, op.id, op.n)
	if op.client != 0 {
		c.fillPending(op, s.out[at:])
	}
	s.waiting = false
	c.noteReplied(s, at)
	c.markDirty(s)
}

// bulkOf returns the operation in progress whose pending request id is k,
// or nil.
func (c *Core) bulkOf(k reqKey) *bulkOp {
	for _, op := range c.bulk {
		if op.client == k.client && op.id == k.id {
			return op
		}
	}
	return nil
}

// startedBulk returns the operation session s just started with request
// id, when it did not complete in the same apply (its reply waits), or
// nil. A session waits for its operation, so it has at most one.
func (c *Core) startedBulk(s *Session, id uint64) *bulkOp {
	if n := len(c.bulk); n > 0 {
		if op := c.bulk[n-1]; op.s == s && op.id == id && op.client == 0 {
			return op
		}
	}
	return nil
}

// GroupBytes estimates the memory of the groups: about 48 bytes per
// grouped timer (a member node and an index slot), 16 to 64 more in a
// group large enough to keep its keys in order (groupOrder), nothing for
// the others (see groupTable).
func (c *Core) GroupBytes() uint64 { return c.groups.groupBytes() }

// groupsInUse reports whether any timer is in a group, a bulk operation
// is in progress or a receiver is paused by pause_all: when none is, an add
// without a group has nothing to note (groupAdded).
func (c *Core) groupsInUse() bool {
	return c.groups.grouped() || len(c.bulk) > 0 || len(c.groups.pausedRecv) > 0
}

// BulkInProgress returns the number of bulk operations not yet complete.
func (c *Core) BulkInProgress() int { return len(c.bulk) }

// groupAdded notes the group of timer k, just added (or replaced): the
// replaced timer's membership ends, the new one joins group g (0: none);
// a receiver's operation in progress leaves it alone; and it is paused
// at once when its receiver or group is paused. It does nothing when g is
// 0 and groupsInUse is false, which add checks first (inlined) so that an
// add on a node that uses no groups skips the call.
func (c *Core) groupAdded(k wheel.Key, g uint64) {
	c.forgetGroup(k)
	if g != 0 {
		c.groups.join(k, g)
	}
	for _, op := range c.bulk {
		if op.group == 0 && op.receiver == k.Receiver && !op.fin && k.Tid >= op.from {
			if op.skip == nil {
				op.skip = make(map[uint64]struct{})
			}
			op.skip[k.Tid] = struct{}{}
		}
	}
	if (len(c.groups.pausedRecv) > 0 || g != 0) && c.groups.startsPaused(k.Receiver, g) {
		_ = c.wheel.Pause(k) // just added: it exists and runs
	}
}

// forgetGroup ends timer k's membership of its group, if any: k was
// removed from the wheel (or is being replaced).
func (c *Core) forgetGroup(k wheel.Key) {
	if !c.groups.grouped() {
		return
	}
	i := c.groups.member(k)
	if i == 0 {
		return
	}
	c.groupRemoved(i)
	c.groups.leave(i)
}

// forgetReceiverGroups ends the memberships of receiver r's timers, before
// they are all cancelled at once (an ephemeral receiver's session ended).
func (c *Core) forgetReceiverGroups(r uint64) {
	if !c.groups.grouped() {
		return
	}
	c.listBuf = c.wheel.List(r, c.listBuf[:0])
	for i := range c.listBuf {
		c.forgetGroup(c.listBuf[i].Key)
	}
	clear(c.listBuf)
}

// groupRemoved moves the cursors of the group operations in progress off
// member node i, which is leaving its group.
func (c *Core) groupRemoved(i uint32) {
	m := &c.groups.nodes[i]
	for _, op := range c.bulk {
		if op.group != m.group || op.cur == 0 {
			continue
		}
		switch {
		case op.cur == i && op.end == i:
			op.cur = 0
		case op.cur == i:
			op.cur = m.next
		case op.end == i:
			op.end = m.prev
		}
	}
}

// closeBulk lets the operations of closing session s go on unanswered.
func (c *Core) closeBulk(s *Session) {
	for _, op := range c.bulk {
		if op.s == s {
			op.s = nil
		}
	}
}

// describeGroup adds timer t's group to its description.
func (c *Core) describeGroup(t *protocol.Timer) {
	t.Group = c.groups.groupOf(wheel.Key{Receiver: t.Receiver, Tid: t.Tid})
}

// listGroup answers a list_group with one page of the group's timers: those
// whose (receiver, tid) is at least (req.FromReceiver, req.FromTid), in
// that order, at most req.Limit of them (0, or more than max_list_page,
// means max_list_page) and no more than fit in max_list_bytes (at least
// one when any is left). The reply's next pair is the key of the first
// timer left out, (0, 0) when none is. A group without timers is an empty
// page. Cost, counted as work: O(log m + page) for a group of m members
// with ordered keys (at least groupOrderMin), else a walk of the group.
func (c *Core) listGroup(s *Session, req *protocol.Request) {
	l := &c.limits
	limit := l.MaxListPage
	if req.Limit != 0 && req.Limit < uint64(limit) {
		limit = int(req.Limit)
	}
	c.timerBuf = c.timerBuf[:0]
	var next wheel.Key
	if gr := c.groups.get(req.Group); gr != nil && gr.count > 0 {
		var work int
		c.keyBuf, work = c.groups.keysFrom(gr, wheel.Key{Receiver: req.FromReceiver, Tid: req.FromTid}, limit+1, c.keyBuf[:0])
		c.work += work
		size := protocol.ListReplyOverhead + 9
		for i, k := range c.keyBuf {
			in, err := c.wheel.Get(k)
			if err != nil {
				continue // (cannot happen: a member's timer is live)
			}
			t := timerOf(&in)
			c.describePlan(&t)
			t.Group = req.Group
			n := protocol.TimerSize(&t)
			if i == limit || (i > 0 && size+n > l.MaxListBytes) {
				next = k
				break
			}
			size += n
			c.timerBuf = append(c.timerBuf, t)
		}
	}
	s.out = protocol.AppendListGroupOK(s.out, req.ID, c.timerBuf, next.Receiver, next.Tid)
	clear(c.timerBuf)
}
