package wheel

import (
	"math"
	"math/bits"
	"slices"
	"unsafe"
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

// digit returns rel / gran[k] for k >= 1 by multiplying with the
// precomputed reciprocal: a hardware divide costs several times more and
// place runs on every add and firing.
func (w *Wheel) digit(rel uint64, k int) uint64 {
	g := w.gran[k]
	q, _ := bits.Mul64(rel, w.recip[k]) // q is rel/g or up to 2 less
	for r := rel - q*g; r >= g; r -= g {
		q++
	}
	return q
}

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
	d := w.nodes.get(i).due
	if rel := d - w.blockStart[0]; w.span[0] == 0 || rel < w.span[0] {
		w.linkSlot0(rel, i)
		return
	}
	for k := 1; k < w.levels; k++ {
		rel := d - w.blockStart[k]
		if sp := w.span[k]; sp != 0 && rel >= sp {
			continue
		}
		rel = w.digit(rel, k)
		w.linkTail(w.sentinel(k, rel), i)
		w.occupied[k][rel>>6] |= 1 << (rel & 63)
		return
	}
	w.linkTail(w.overflow, i)
	w.overflowMin = min(w.overflowMin, d)
}

// linkSlot0 links node i at the tail of level-0 slot s (whose sentinel is
// s), and marks the slot unsorted when i was added before the slot's tail.
func (w *Wheel) linkSlot0(s uint64, i uint32) {
	h := w.nodes.get(uint32(s))
	t := h.wprev
	n := w.nodes.at(i)
	tn := w.nodes.at(t)
	bit := uint64(1) << (s & 63)
	if t == uint32(s) {
		w.unsorted[s>>6] &^= bit
	} else if tn.order() > n.order() {
		w.unsorted[s>>6] |= bit
	}
	n.wnext, n.wprev = uint32(s), t
	tn.wnext = i
	h.wprev = i
	w.occupied[0][s>>6] |= bit
}

// linkTail links node i at the tail of the list whose sentinel is s.
func (w *Wheel) linkTail(s, i uint32) {
	h := w.nodes.get(s) // a sentinel: written through get (see slab.get)
	t := h.wprev
	n := w.nodes.at(i)
	n.wnext, n.wprev = s, t
	w.nodes.at(t).wnext = i
	h.wprev = i
}

// linkBefore links node i just before node s, a sentinel or a timer, in
// its circular list.
func (w *Wheel) linkBefore(s, i uint32) {
	h := w.nodes.at(s)
	t := h.wprev
	n := w.nodes.at(i)
	n.wnext, n.wprev = s, t
	w.nodes.at(t).wnext = i
	h.wprev = i
}

// unlink takes armed or due node i out of the wheel.
func (w *Wheel) unlink(i uint32) {
	n := w.nodes.get(i) // only read: the barrier is for writes
	p, q := n.wprev, n.wnext
	w.nodes.at(p).wnext = q
	w.nodes.at(q).wprev = p
	if p == q && p < w.overflow { // i was alone in a slot: mark it empty
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
			rel = w.digit(rel, k)
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
	if w.nodes.get(w.overflow).wnext != w.overflow {
		if w.overflowStale {
			w.refreshOverflowMin()
		}
		// The turn of the top level whose block holds the earliest overflow timer.
		return w.overflowMin - w.overflowMin%w.span[w.levels-1], true
	}
	return 0, false
}

// noteUnlinked notes that a timer due at due left the wheel's lists: if it
// may have been the earliest of the overflow list, overflowMin may now be
// below the earliest left.
func (w *Wheel) noteUnlinked(due uint64) {
	if due == w.overflowMin {
		w.overflowStale = true
	}
}

// refreshOverflowMin sets overflowMin to the earliest due tick in the
// overflow list. Only geometries whose levels span less than 2^64 ticks have
// an overflow list; it runs at most once per removal of its earliest timer.
func (w *Wheel) refreshOverflowMin() {
	m := uint64(math.MaxUint64)
	for i := w.nodes.get(w.overflow).wnext; i != w.overflow; {
		n := w.nodes.get(i)
		m = min(m, n.due)
		i = n.wnext
	}
	w.overflowMin, w.overflowStale = m, false
}

// turn does the work of tick now = t, reached by nextEvent: it moves down
// the slots that start at t, highest level first, then makes the timers due
// at t the due list, in add order, and relinks it into the same-tick order
// (fairOrder); or, when timers are still due (Advance's catchUp), makes
// them join the rotation in add order (fair.go). A slot already in add order (the common
// case: timers added in order and moved down in order) is spliced in whole;
// only an unsorted one is sorted.
func (w *Wheel) turn() {
	t := w.now
	top := w.levels - 1
	if sp := w.span[top]; sp != 0 && w.blockStart[top] == t && w.overflowMin-w.overflowMin%sp == t {
		w.overflowMin, w.overflowStale = math.MaxUint64, false
		w.replace(w.overflow)
	}
	for k := top; k >= 1; k-- {
		if w.blockStart[k-1] != t { // t is not a multiple of gran[k]
			continue
		}
		s := w.digit(t-w.blockStart[k], k)
		if w.occupied[k][s>>6]&(1<<(s&63)) != 0 {
			w.occupied[k][s>>6] &^= 1 << (s & 63)
			w.replace(w.sentinel(k, s))
		}
	}
	s := t - w.blockStart[0]
	if w.index.table.len() >= prefetchMin {
		w.prefetchSlots(s)
	}
	bit := uint64(1) << (s & 63)
	if w.occupied[0][s>>6]&bit == 0 {
		return
	}
	w.occupied[0][s>>6] &^= bit
	head := w.sentinel(0, s)
	h := w.nodes.get(head)
	first, last := h.wnext, h.wprev
	h.wnext, h.wprev = head, head
	if w.unsorted[s>>6]&bit != 0 {
		w.unsorted[s>>6] &^= bit
		a := w.dueBuf[:0]
		for i := first; i != head; i = w.nodes.get(i).wnext {
			a = append(a, uint64(w.nodes.get(i).order())<<32|uint64(i))
		}
		a = w.sortBySeq(a)
		for j := 1; j < len(a); j++ {
			p, q := uint32(a[j-1]), uint32(a[j])
			w.nodes.at(p).wnext = q
			w.nodes.at(q).wprev = p
		}
		first, last = uint32(a[0]), uint32(a[len(a)-1])
		w.dueBuf = a[:0]
	}
	if w.dueEmpty() {
		w.linkDue(first, last)
		w.fairOrder()
		return
	}
	// Timers still due (Advance's catchUp): the tick's join the rotation
	// in add order.
	if !w.rot.on {
		w.toRotation()
	}
	w.nodes.at(last).wnext = nilIdx
	for i := first; i != nilIdx; {
		next := w.nodes.get(i).wnext
		w.rotAppend(i)
		i = next
	}
}

// slotsAhead is how many level-0 slots ahead of a turn's prefetchSlots
// asks for the first node of a slot's list; half as many ahead, for the
// index entry its last firing deletes.
const slotsAhead = 8

// prefetchSlots is prefetchRemoval across ticks, for the turn of level-0
// slot s: where ticks hold a few timers each (a catch-up over hours of
// timers spread thin, which a restart may replay), a tick's due list is
// too short for Advance's lookahead to reach a node before it fires, and
// each firing waited on its node and then on its index entry. It asks for
// the line of the first node of slot s+slotsAhead, then, for slot
// s+slotsAhead/2 (whose first node a turn before asked for), its index
// entry, in the current block of level 0. Only a hint: nothing is
// written, and a slot whose list changes meanwhile costs a useless
// prefetch.
func (w *Wheel) prefetchSlots(s uint64) {
	if a := s + slotsAhead; a < uint64(w.slots) && w.occupied[0][a>>6]&(1<<(a&63)) != 0 {
		prefetch(unsafe.Pointer(w.nodes.get(w.nodes.get(w.sentinel(0, a)).wnext)))
	}
	if a := s + slotsAhead/2; a < uint64(w.slots) && w.occupied[0][a>>6]&(1<<(a&63)) != 0 {
		w.prefetchRemoval(w.nodes.get(w.sentinel(0, a)).wnext)
	}
}

// linkDue makes the chain first..last (linked by wnext/wprev) the due list,
// which is empty.
func (w *Wheel) linkDue(first, last uint32) {
	d := w.nodes.get(w.due)
	d.wnext, d.wprev = first, last
	w.nodes.at(first).wprev = w.due
	w.nodes.at(last).wnext = w.due
}

// replace empties the list headed by s and places each of its timers again
// relative to now.
func (w *Wheel) replace(s uint32) {
	h := w.nodes.get(s)
	i := h.wnext
	h.wnext, h.wprev = s, s
	for i != s {
		next := w.nodes.get(i).wnext
		w.place(i)
		i = next
	}
}

// sortBySeq sorts entries of the form seq<<32|index. A slot's timers arrive
// as a few runs (re-armed at different ticks, moved down from higher levels,
// re-armed in the same-tick order of rounds by receiver), so sorted input is
// checked for first, input of a few ascending runs is merged, and other
// large batches are radix-sorted on the bits the seq numbers actually span.
func (w *Wheel) sortBySeq(a []uint64) []uint64 {
	if slices.IsSorted(a) {
		return a
	}
	if len(a) < 128 {
		slices.Sort(a)
		return a
	}
	if m, ok := w.mergeRuns(a); ok {
		return m
	}
	lo, hi := a[0]>>32, a[0]>>32
	for _, e := range a {
		lo, hi = min(lo, e>>32), max(hi, e>>32)
	}
	buf := slices.Grow(w.sortBuf[:0], len(a))[:len(a)]
	const radix = 8
	var count [1 << radix]int
	for shift := 0; shift < bits.Len64(hi-lo); shift += radix {
		clear(count[:])
		for _, e := range a {
			count[(e>>32-lo)>>shift&(1<<radix-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, e := range a {
			d := (e>>32 - lo) >> shift & (1<<radix - 1)
			buf[count[d]] = e
			count[d]++
		}
		a, buf = buf, a
	}
	w.sortBuf = buf[:0]
	return a
}

// maxMergeRuns is the most ascending runs mergeRuns merges (in two passes);
// more are radix-sorted.
const maxMergeRuns = 4

// mergeRuns sorts a when it is at most maxMergeRuns ascending runs, by
// merging them pairwise into sortBuf and back, and returns the sorted
// entries (in a or in the other buffer); ok is false, a untouched, for
// more runs. A tick fired in rounds by receiver re-arms its repeating
// timers in that order, which is typically two runs: the first round,
// then the rest.
func (w *Wheel) mergeRuns(a []uint64) (sorted []uint64, ok bool) {
	var cut [maxMergeRuns + 1]int // run k is a[cut[k]:cut[k+1]]
	k := 1
	for i := 1; i < len(a); i++ {
		if a[i] < a[i-1] {
			if k == maxMergeRuns {
				return a, false
			}
			cut[k] = i
			k++
		}
	}
	cut[k] = len(a)
	buf := slices.Grow(w.sortBuf[:0], len(a))[:len(a)]
	for ; k > 1; k = (k + 1) / 2 {
		for j := 0; j < k; j += 2 {
			lo, mid, hi := cut[j], cut[min(j+1, k)], cut[min(j+2, k)]
			mergeInto(buf[lo:hi], a[lo:mid], a[mid:hi])
			cut[j/2] = lo
		}
		cut[(k+1)/2] = len(a)
		a, buf = buf, a
	}
	w.sortBuf = buf[:0]
	return a, true
}

// mergeInto merges the ascending x and y into dst, of their total length.
func mergeInto(dst, x, y []uint64) {
	i, j := 0, 0
	for d := range dst {
		if j == len(y) || i < len(x) && x[i] < y[j] {
			dst[d] = x[i]
			i++
		} else {
			dst[d] = y[j]
			j++
		}
	}
}
