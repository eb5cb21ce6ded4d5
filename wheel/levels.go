package wheel

import (
	"math/bits"
	"slices"
)

// The wheel keeps timers by absolute due tick. Reading ticks as numbers in
// base `slots`, a timer sits at level k, slot d_k, where k is the highest digit
// in which its due tick d differs from now: level 0 holds the timers due in
// now's current run of `slots` ticks, level 1 those due later in now's run of
// slots² ticks, and so on. When now reaches the start of a level-k slot
// (a multiple of gran[k]) that slot's timers are placed again, landing at
// lower levels; a timer is thus moved down at most once per level and fires
// from level 0 exactly on its due tick. A level-k slot at or before now's digit
// k is always empty, so the next tick with work is the first occupied slot
// after now's digit at the lowest level that has one: empty time is skipped
// at the cost of a few bitmap scans.

// sentinel returns the index of the list head of slot s at level k.
func (w *Wheel) sentinel(k int, s uint64) uint32 { return uint32(k*w.slots) + uint32(s) }

// setNow moves now to t (t >= now) and refreshes the block starts that changed.
func (w *Wheel) setNow(t uint64, all bool) {
	w.now = t
	for k := range w.levels {
		sp := w.span[k]
		if sp == 0 {
			w.blockStart[k] = 0
			break // and so are all higher levels, set at New
		}
		if !all && t-w.blockStart[k] < sp {
			break // t is still in this block, hence in every higher one
		}
		w.blockStart[k] = t - t%sp
	}
}

// place links node i, whose due tick is >= now, into the slot it belongs to
// relative to now (or the overflow list when it is beyond the top level).
func (w *Wheel) place(i uint32) {
	d := w.nodes.at(i).due
	for k := range w.levels {
		rel := d - w.blockStart[k]
		if sp := w.span[k]; sp != 0 && rel >= sp {
			continue
		}
		if k > 0 {
			rel /= w.gran[k]
		}
		w.linkTail(w.sentinel(k, rel), i)
		w.occupied[k][rel>>6] |= 1 << (rel & 63)
		return
	}
	w.linkTail(w.overflow, i)
}

func (w *Wheel) linkTail(s, i uint32) {
	h := w.nodes.at(s)
	t := h.wprev
	n := w.nodes.at(i)
	n.wnext, n.wprev = s, t
	w.nodes.at(t).wnext = i
	h.wprev = i
}

// unlink removes node i from the slot, pending or overflow list it is in.
func (w *Wheel) unlink(i uint32) {
	n := w.nodes.at(i)
	p, q := n.wprev, n.wnext
	w.nodes.at(p).wnext = q
	w.nodes.at(q).wprev = p
	if p == q && p < w.pendingHead { // i was alone in a slot: mark it empty
		k, s := int(p)/w.slots, int(p)%w.slots
		w.occupied[k][s>>6] &^= 1 << (s & 63)
	}
}

// nextEvent returns the first tick after now at which a slot or the overflow
// list has timers to fire or move down.
func (w *Wheel) nextEvent() (uint64, bool) {
	words := (w.slots + 63) / 64
	for k := range w.levels {
		rel := w.now - w.blockStart[k]
		if k > 0 {
			rel /= w.gran[k]
		}
		// The first occupied slot after now's digit, rel.
		from := int(rel) + 1
		for wi := from >> 6; wi < words; wi++ {
			m := w.occupied[k][wi]
			if wi == from>>6 {
				m &^= 1<<(from&63) - 1
			}
			if m != 0 {
				s := uint64(wi<<6 + bits.TrailingZeros64(m))
				return w.blockStart[k] + s*w.gran[k], true
			}
		}
	}
	if w.nodes.at(w.overflow).wnext != w.overflow {
		top := w.levels - 1
		return w.blockStart[top] + w.span[top], true
	}
	return 0, false
}

// turn does the work of tick now = t, reached by nextEvent: it moves down the
// slots that start at t, highest level first, then moves the timers due at t
// into the pending list in add order.
func (w *Wheel) turn() {
	t := w.now
	top := w.levels - 1
	if sp := w.span[top]; sp != 0 && w.blockStart[top] == t {
		w.replace(w.overflow)
	}
	for k := top; k >= 1; k-- {
		if w.blockStart[k-1] != t { // t is not a multiple of gran[k]
			continue
		}
		s := (t - w.blockStart[k]) / w.gran[k]
		if w.occupied[k][s>>6]&(1<<(s&63)) != 0 {
			w.occupied[k][s>>6] &^= 1 << (s & 63)
			w.replace(w.sentinel(k, s))
		}
	}
	s := t - w.blockStart[0]
	if w.occupied[0][s>>6]&(1<<(s&63)) == 0 {
		return
	}
	w.occupied[0][s>>6] &^= 1 << (s & 63)
	head := w.sentinel(0, s)
	h := w.nodes.at(head)
	sc := w.scratch[:0]
	for i := h.wnext; i != head; i = w.nodes.at(i).wnext {
		sc = append(sc, uint64(w.nodes.at(i).seq)<<32|uint64(i))
	}
	h.wnext, h.wprev = head, head
	if !slices.IsSorted(sc) {
		slices.Sort(sc)
	}
	for _, e := range sc {
		w.linkTail(w.pendingHead, uint32(e))
	}
	w.scratch = sc[:0]
}

// replace empties the list headed by s and places each of its timers again
// relative to now.
func (w *Wheel) replace(s uint32) {
	h := w.nodes.at(s)
	i := h.wnext
	h.wnext, h.wprev = s, s
	for i != s {
		next := w.nodes.at(i).wnext
		w.place(i)
		i = next
	}
}

// insertPending links node i, due now, into the pending list at its place in
// add order. Only a timer paused and resumed while an Advance is stopped part
// way through a tick gets here.
func (w *Wheel) insertPending(i uint32) {
	seq := w.nodes.at(i).seq
	p := w.nodes.at(w.pendingHead).wprev
	for p != w.pendingHead && w.nodes.at(p).seq > seq {
		p = w.nodes.at(p).wprev
	}
	// Link i after p.
	n := w.nodes.at(i)
	q := w.nodes.at(p).wnext
	n.wprev, n.wnext = p, q
	w.nodes.at(p).wnext = i
	w.nodes.at(q).wprev = i
}
