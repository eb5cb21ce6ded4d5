package wheel

// The same-tick order. A tick's due timers fire in rounds: first each
// receiver's earliest-added timer due on the tick, then each receiver's
// second, and so on; within a round, in add order. A receiver's own timers
// thus still fire in add order, and timers of receivers with one timer each
// fire in plain add order, but a receiver with a million timers due on one
// tick no longer holds back another receiver's timer added after them: that
// one fires in the first round, among the first firings of the tick, so a
// driver that bounds each Advance (see Advance's max) delivers it in the
// tick's first turn.
//
// The order is made once per tick, when turn makes the tick's due list (in
// add order) and fairOrder relinks it into rounds: one pass over the tick's
// timers with a per-receiver count. From then on the due list is the order;
// changes during the tick only remove from it, except a timer that becomes
// due at Now() after the order was made (Resume with no ticks left,
// Reschedule to Now()), which goes to its end (appendDue). A snapshot
// records the due list's order (SnapshotVersion 2), so a wheel restored
// mid-tick fires the rest of the tick in the same order.

// fairState is fairOrder's scratch, kept between ticks so that steady
// state allocates nothing. Owned by the wheel.
type fairState struct {
	// rank counts the timers of each receiver met so far in this pass:
	// the round of its next one. Cleared after each pass.
	rank map[uint64]uint32
	// head and tail are round k's first and last node.
	head, tail []uint32
}

// fairOrder relinks the due list, which holds the timers due at Now() in
// add order and none fired yet, into rounds by receiver (see above). A list
// in which no receiver has two timers keeps its order.
func (w *Wheel) fairOrder() {
	d := w.nodes.at(w.due)
	first := d.wnext
	if first == w.due || d.wprev == first { // empty, or one timer
		return
	}
	f := &w.fair
	if f.rank == nil {
		f.rank = make(map[uint64]uint32)
	}
	head, tail := f.head[:0], f.tail[:0]
	// Runs of one receiver are common (its timers added together), so the
	// current run's receiver and round are kept out of the map until the
	// run ends; a receiver's only timer (alone in its receiver list) is
	// round 0 without a look-up.
	var recv uint64
	var next uint32 // the round of the run's next timer
	run := false
	for i := first; i != w.due; {
		n := w.nodes.at(i)
		after := n.wnext
		var r uint32 // round 0 for its receiver's only timer: no look-up
		if n.rnext != nilIdx || n.rprev != nilIdx {
			if !run || n.receiver != recv {
				if run {
					f.rank[recv] = next
				}
				recv, next, run = n.receiver, f.rank[n.receiver], true
			}
			r = next
			next++
		}
		if int(r) == len(head) {
			head, tail = append(head, i), append(tail, i)
		} else {
			t := tail[r]
			w.nodes.at(t).wnext = i
			n.wprev = t
			tail[r] = i
		}
		i = after
	}
	// Chain the rounds: the due list is round 0, then round 1, ...
	prev := w.due
	for k, h := range head {
		w.nodes.at(prev).wnext = h
		w.nodes.at(h).wprev = prev
		prev = tail[k]
	}
	w.nodes.at(prev).wnext = w.due
	d.wprev = prev
	// Scratch grown by a rare huge tick is let go rather than held.
	if len(f.rank) > fairKeep {
		f.rank = nil
	} else {
		clear(f.rank)
	}
	if cap(head) > fairKeep {
		head, tail = nil, nil
	}
	f.head, f.tail = head[:0], tail[:0]
}

// fairKeep bounds the scratch fairOrder keeps between ticks: receivers in
// its map, rounds in head and tail (up to about 2 MiB).
const fairKeep = 1 << 16

// appendDue puts node i, due at Now(), at the end of the due list: after
// the timers already due (see the same-tick order above).
func (w *Wheel) appendDue(i uint32) {
	w.linkTail(w.due, i)
}
