package wheel

import "slices"

// The order of the due timers: the rotation. The timers due at or before
// Now() and not fired yet (the due set) fire in rotation by receiver: the
// receivers with due timers stand in a ring, each with its own queue of
// due timers; the receiver at the front fires the first timer of its queue
// and goes to the back (or leaves the ring when its queue is empty). A
// receiver that gets a due timer while it has none joins the ring at the
// back; one that has some gets it at the end of its queue. So:
//
//   - a tick reached with nothing else due fires in rounds: each receiver's
//     earliest-added timer due on it, then each one's second, and so on,
//     each round in the order the receivers' first timers were added (a
//     tick where no receiver has two timers fires in add order);
//   - a receiver's own timers fire in due order, then add order within a
//     tick; a timer that becomes due at Now() after its receiver's others
//     (Resume with no ticks left, Reschedule to Now()) goes to the end of
//     its receiver's queue;
//   - when a bounded Advance leaves timers due (a backlog), each later
//     bounded call moves time on by one tick (up to its `to`), and the
//     timers due on it join the rotation before it fires, so a receiver with nothing else due fires
//     within a round of the rotation, however many timers another receiver
//     has in its queue: a million timers of one receiver on one tick no
//     longer hold back another receiver's timer of the next tick (an
//     unbounded call fires the backlog first, then goes on tick by tick);
//   - a repeating timer whose next firing is due at or before Now() when it
//     fires again (its interval is shorter than the backlog's delay) goes
//     into its receiver's queue in due order, then add order.
//
// Two representations give the same order. In list mode (the common case:
// a tick fired before time moves on) the due list is the firing order
// itself, made once per tick by fairOrder, and Advance takes its head. The
// rotation mode keeps the ring (rotState) with each receiver's queue a
// contiguous run of the due list; the wheel switches to it (toRotation:
// the receivers in order of first appearance in the list, which is the
// list's order again) when the list is changed other than at its head —
// a timer joins it, or one leaves it other than by firing — and back to
// list mode when the due set is empty. A snapshot records the firing order
// and how late each due timer is (SnapshotVersion 3), and restores in list
// mode.

// fairState is fairOrder's scratch, kept between ticks so that steady
// state allocates nothing. Owned by the wheel.
type fairState struct {
	// rank maps each receiver met so far in this pass with more than one
	// timer to its entry in cur and end. Cleared after each pass.
	rank map[uint64]uint32
	// cur and end are each receiver's chain of due timers: its next node
	// to emit and its last one, in order of first appearance.
	cur, end []uint32
	// period and sorted are inRounds' scratch: the receivers of the
	// list's first round, and a sorted copy.
	period, sorted []uint64
}

// fairOrder relinks the due list, which holds the timers due at Now() in
// add order and none fired yet, into rounds by receiver (see above). A list
// in which no receiver has two timers keeps its order.
func (w *Wheel) fairOrder() {
	d := w.nodes.get(w.due)
	first := d.wnext
	if first == w.due || d.wprev == first { // empty, or one timer
		return
	}
	if w.inRounds(first) {
		return
	}
	f := &w.fair
	if f.rank == nil {
		f.rank = make(map[uint64]uint32)
	}
	cur, end := f.cur[:0], f.end[:0]
	// Chain each receiver's timers (through wnext; a node's link is read
	// before it is rewritten). Runs of one receiver are common (its timers
	// added together), so the current run's receiver and entry are kept
	// out of the map until the run ends; a receiver's only timer (alone in
	// its receiver list) needs no look-up.
	var recv uint64
	var e uint32
	run, chained := false, false
	for i := first; i != w.due; {
		n := w.nodes.get(i)
		after := n.wnext
		join := false
		if n.rnext != nilIdx || n.rprev != nilIdx {
			if !run || n.receiver != recv {
				var ok bool
				if e, ok = f.rank[n.receiver]; !ok {
					e = uint32(len(cur))
					f.rank[n.receiver] = e
				} else {
					join = true
				}
				recv, run = n.receiver, true
			} else {
				join = true
			}
		} else {
			run = false
		}
		if join {
			w.nodes.at(end[e]).wnext = i
			end[e] = i
			chained = true
		} else {
			cur, end = append(cur, i), append(end, i)
		}
		i = after
	}
	if chained {
		w.emitRounds(cur, end)
	}
	// Scratch grown by a rare huge tick is let go rather than held.
	if len(f.rank) > fairKeep {
		f.rank = nil
	} else {
		clear(f.rank)
	}
	if cap(cur) > fairKeep {
		cur, end = nil, nil
	}
	f.cur, f.end = cur[:0], end[:0]
}

// inRounds reports whether the due list from first is in rounds already,
// so that fairOrder would leave it as it is, found without a map and
// without writing a node: the list is periodic (the receivers of its
// first round, up to its first receiver's second timer, repeat in that
// order, the last round a prefix of it) and that first round names each
// receiver once. Then each receiver's chain is its timers at the round's
// positions, and the rounds of the chains are the list itself. The common
// cases: one receiver's timers (a period of one), and a burst added
// round-robin over its receivers. Anything else (it stops at the first
// timer out of step, or finds no second round) is left to fairOrder's
// relinking, which took 157 of a firing's 714 instructions
// (BenchmarkFireRearm, one receiver).
func (w *Wheel) inRounds(first uint32) bool {
	f := &w.fair
	n0 := w.nodes.get(first)
	if n0.rnext == nilIdx && n0.rprev == nilIdx {
		return false // its receiver's only timer: no second round, found without a walk
	}
	r0 := n0.receiver
	period := f.period[:0]
	i := first
	for ; i != w.due; i = w.nodes.get(i).wnext {
		r := w.nodes.get(i).receiver
		if r == r0 && len(period) > 0 {
			break
		}
		period = append(period, r)
	}
	if cap(period) > fairKeep { // scratch grown by a rare huge tick is let go
		f.period = nil
	} else {
		f.period = period[:0]
	}
	if i == w.due { // no second round
		return false
	}
	// A long list is read with its next nodes prefetched (prefetchAfter);
	// a short one, the common tick, without the prefetches' cost.
	if len(period) == 1 { // one receiver's timers: the common case, read alone
		for n := 0; i != w.due; i = w.nodes.get(i).wnext {
			if n++; n > walkAhead && i%spanStep == 0 {
				w.nodes.prefetchAfter(i)
			}
			if w.nodes.get(i).receiver != r0 {
				return false
			}
		}
		return true
	}
	for k, n := 0, 0; i != w.due; i = w.nodes.get(i).wnext {
		if n++; n > walkAhead && i%spanStep == 0 {
			w.nodes.prefetchAfter(i)
		}
		if w.nodes.get(i).receiver != period[k] {
			return false
		}
		if k++; k == len(period) {
			k = 0
		}
	}
	sorted := append(f.sorted[:0], period...)
	slices.Sort(sorted)
	if cap(sorted) > fairKeep {
		f.sorted = nil
	} else {
		f.sorted = sorted[:0]
	}
	for j := 1; j < len(sorted); j++ {
		if sorted[j] == sorted[j-1] {
			return false
		}
	}
	return true
}

// emitRounds makes the due list the rounds of the chains cur[k]..end[k]
// (linked through wnext): each chain's first node in order of k, then each
// one's second, and so on.
func (w *Wheel) emitRounds(cur, end []uint32) {
	prev := w.due
	for len(cur) > 0 {
		k := 0
		for j, i := range cur {
			n := w.nodes.at(i)
			next := n.wnext // its chain's next, before the link is rewritten
			w.nodes.at(prev).wnext = i
			n.wprev = prev
			prev = i
			if i != end[j] {
				cur[k], end[k] = next, end[j]
				k++
			}
		}
		cur, end = cur[:k], end[:k]
	}
	w.nodes.at(prev).wnext = w.due
	w.nodes.get(w.due).wprev = prev
}

// fairKeep bounds the scratch fairOrder keeps between ticks: receivers in
// its map and chains (up to about 2 MiB).
const fairKeep = 1 << 16

// rotState is the rotation mode's ring (see above). Owned by the wheel;
// on only while the due set is not empty.
type rotState struct {
	on bool
	// groups maps each receiver with due timers to its queue.
	groups map[uint64]*dueGroup
	// ring[head:] is the ring, front first; a group that left it (dead)
	// stays in the slice until it reaches the front.
	ring []*dueGroup
	head int
}

// dueGroup is one receiver's queue: the run first..last of the due list.
type dueGroup struct {
	recv        uint64
	first, last uint32
	dead        bool // left the ring: its queue emptied
}

// inDue reports whether armed node n (linked in a wheel list) is in the
// due set: timers in slots are due after Now().
func (w *Wheel) inDue(n *node) bool { return n.due <= w.now }

// toRotation switches to rotation mode: the due list's receivers in order
// of first appearance form the ring, their timers in list order their
// queues. The firing order is unchanged: the list was already the ring's.
func (w *Wheel) toRotation() {
	r := &w.rot
	if r.groups == nil {
		r.groups = make(map[uint64]*dueGroup)
	}
	r.on = true
	d := w.nodes.get(w.due)
	a := w.dueBuf[:0]
	for i := d.wnext; i != w.due; i = w.nodes.get(i).wnext {
		a = append(a, uint64(i))
	}
	d.wnext, d.wprev = w.due, w.due
	for _, i := range a {
		w.rotAppend(uint32(i))
	}
	w.dueBuf = a[:0]
}

// rotEnd leaves rotation mode once the due set is empty.
func (w *Wheel) rotEnd() {
	r := &w.rot
	clear(r.ring)
	r.on, r.ring, r.head = false, r.ring[:0], 0
	if cap(r.ring) > fairKeep {
		r.ring = nil
	}
}

// rotGroup returns the queue of node n's receiver, a new one at the back
// of the ring holding only n (linked at the due list's end) when it has
// none: then isNew is true.
func (w *Wheel) rotGroup(i uint32) (g *dueGroup, isNew bool) {
	r := &w.rot
	recv := w.nodes.get(i).receiver
	if g = r.groups[recv]; g != nil {
		return g, false
	}
	g = &dueGroup{recv: recv, first: i, last: i}
	r.groups[recv] = g
	r.ring = append(r.ring, g)
	w.linkTail(w.due, i)
	return g, true
}

// rotAppend puts node i at the end of its receiver's queue.
func (w *Wheel) rotAppend(i uint32) {
	g, isNew := w.rotGroup(i)
	if isNew {
		return
	}
	w.linkBefore(w.nodes.get(g.last).wnext, i)
	g.last = i
}

// rotInsert puts node i into its receiver's queue after the timers due
// before it, or on its tick and added before it: in due order, then add
// order. The queue is searched from its end, where a re-armed timer
// usually belongs.
func (w *Wheel) rotInsert(i uint32) {
	g, isNew := w.rotGroup(i)
	if isNew {
		return
	}
	n := w.nodes.get(i)
	j := g.last
	for {
		m := w.nodes.get(j)
		if m.due < n.due || m.due == n.due && m.order() < n.order() {
			break
		}
		if j == g.first {
			w.linkBefore(j, i) // before the queue's first
			g.first = i
			return
		}
		j = m.wprev
	}
	w.linkBefore(w.nodes.get(j).wnext, i)
	if j == g.last {
		g.last = i
	}
}

// rotNext takes the next timer to fire off the ring (which is not empty):
// the front receiver's first, the receiver going to the back if it has
// more. It leaves rotation mode when that was the last due timer.
func (w *Wheel) rotNext() uint32 {
	r := &w.rot
	for {
		g := r.ring[r.head]
		r.ring[r.head] = nil
		r.head++
		if g.dead {
			continue
		}
		i := g.first
		if i == g.last {
			g.dead = true
			delete(r.groups, g.recv)
		} else {
			g.first = w.nodes.get(i).wnext
			r.ring = append(r.ring, g)
		}
		w.unlink(i)
		if r.head >= 64 && r.head*2 >= len(r.ring) { // drop the front's spent part
			n := copy(r.ring, r.ring[r.head:])
			clear(r.ring[n:])
			r.ring, r.head = r.ring[:n], 0
		}
		if len(r.groups) == 0 {
			w.rotEnd()
		}
		return i
	}
}

// rotRemove takes due node i out of its receiver's queue and the due list.
func (w *Wheel) rotRemove(i uint32) {
	r := &w.rot
	n := w.nodes.get(i)
	g := r.groups[n.receiver]
	switch {
	case g.first == i && g.last == i:
		g.dead = true
		delete(r.groups, g.recv)
	case g.first == i:
		g.first = n.wnext
	case g.last == i:
		g.last = n.wprev
	}
	w.unlink(i)
	if len(r.groups) == 0 {
		w.rotEnd()
	}
}

// unlinkArmed takes armed node i out of its slot, or out of the due set
// (switching to rotation mode: the rest keeps the rotation's order).
func (w *Wheel) unlinkArmed(i uint32) {
	if !w.inDue(w.nodes.get(i)) {
		w.unlink(i)
		return
	}
	if !w.rot.on {
		w.toRotation()
	}
	w.rotRemove(i)
}

// joinDue puts node i, due at or before Now(), into the due set: at the
// end of its receiver's queue (append), or in due order then add order
// (a timer re-armed or moved into the past of a wheel that ran ahead).
func (w *Wheel) joinDue(i uint32, append bool) {
	if !w.rot.on {
		if w.dueEmpty() && w.nodes.get(i).due == w.now { // the list of this one timer
			w.linkTail(w.due, i)
			return
		}
		w.toRotation()
	}
	if append {
		w.rotAppend(i)
	} else {
		w.rotInsert(i)
	}
}

// appendDue puts node i, due at Now(), at the end of its receiver's queue
// (see the rotation above).
func (w *Wheel) appendDue(i uint32) { w.joinDue(i, true) }

// dueEmpty reports whether no timer is due.
func (w *Wheel) dueEmpty() bool { return w.nodes.get(w.due).wnext == w.due }

// rotRing returns the ring from its front, each receiver's queue as its
// first and last node (for Freeze).
func (w *Wheel) rotRing() [][2]uint32 {
	r := &w.rot
	ring := make([][2]uint32, 0, len(r.groups))
	for _, g := range r.ring[r.head:] {
		if !g.dead {
			ring = append(ring, [2]uint32{g.first, g.last})
		}
	}
	return ring
}

// OldestDue returns the tick the earliest-due of the timers due and not
// fired yet was due at: Now() but when a bounded Advance left a backlog
// that a later one ran ahead of (see Advance). ok is false when no timer
// is due. It costs a look at each receiver with timers due.
func (w *Wheel) OldestDue() (tick uint64, ok bool) {
	if w.dueEmpty() {
		return 0, false
	}
	if !w.rot.on { // list mode: every due timer is due at Now()
		return w.now, true
	}
	tick = w.now
	for _, g := range w.rot.groups { // each queue is in due order
		tick = min(tick, w.nodes.get(g.first).due)
	}
	return tick, true
}
