package wheel

import (
	"fmt"
	"math"
	"slices"
)

// Restoring version 3: records in any order, each with its seq (see
// SnapshotVersion). Each timer gets the next node of the slab, its own
// seq, and its place in the wheel as it is read (a level-0 slot linked out
// of add order is marked unsorted, as when the wheel runs); its receiver's
// list gets it from the index builder, in slab order as the builder goes
// (IndexBuilder.linkRecv), and a receiver whose list that leaves out of
// add order is noted and sorted once the index is built (sortLists); the
// due timers are sorted once the records are read (sortRestored).

// restoreTimer3 adds timer t, read from a version 3 snapshot, to the wheel
// being restored (see restoreTimer): with its seq, its receiver's list
// noted when t is older than the list's head, a due one only collected.
func (r *Restorer) restoreTimer3(t *snapTimer) {
	w := r.w
	// The next node of the slab: a restore frees none, so the free set
	// (alloc's first look) is empty, and the header checked the count.
	i := w.nodes.n
	if i >= w.nodes.arr.len() {
		w.nodes.grow(i)
	}
	w.nodes.n++
	// The wheel being restored has never been frozen: no page is shared, so
	// the nodes are written through get, without at's write barrier check.
	n := w.nodes.get(i)
	n.receiver, n.tid, n.seq, n.repeat, n.fired = t.key.Receiver, t.key.Tid, t.seq, t.repeat, uint32(t.fired)
	n.rprev = t.id // the receiver's id (version 6), for the index builder (recvid.go)
	r.maxSeq, r.anySeq = max(r.maxSeq, t.seq), true
	if t.every <= math.MaxUint32 && len(t.data) == 0 && t.fired <= math.MaxUint32 {
		n.every = uint32(t.every)
	} else {
		n.every = w.extra.alloc(t.every, t.data)
		w.extra.at(n.every).firedHi = uint32(t.fired >> 32)
		n.seq |= flagExtra
	}
	// Its receiver's list: the index builder links it (restorerecv.go).
	switch {
	case t.paused:
		n.due, n.wprev, n.wnext = t.delay, markPaused, nilIdx
	case t.delay == 0: // due now, not fired yet: linked by dueOrder
		n.due, n.wprev, n.wnext = w.now, nilIdx, nilIdx
		r.dueNodes = append(r.dueNodes, i)
	default:
		n.due = w.now + t.delay
		r.place(i, n)
	}
}

// slotCache is the level-1-or-higher slot the previous armed timer of a
// restore went to, and the due ticks [lo, lo+gran) that go there (see
// Restorer.place).
type slotCache struct {
	lo, gran uint64
	s        uint32 // the slot's sentinel; 0: no slot cached
	head     *node  // the sentinel's node
}

// place is Wheel.place for the restore's node i (n), armed: a timer due in
// the slot the previous one went to, at level 1 or higher, is linked
// there without the search of the levels (with the default geometry of
// 100 slots, a level-2 slot is 10^4 ticks, a level-3 one 10^6: the timers
// of a snapshot written in add order, due a fixed delay after their add,
// come one slot at a time). A level-k slot (k >= 1) is all due ticks of one
// value of their digit k in level k's block, and every lower level's block
// is one slot of the level above (blockStart[k] is a multiple of span[k],
// which is gran[k+1]): a due tick in the cached slot's range is outside
// every lower level's block, as the cached one was, so Wheel.place would
// put it in the same slot. The level-0 slots (whose unsorted marks
// linkSlot0 keeps) and the overflow list (whose overflowMin place keeps)
// go through Wheel.place.
func (r *Restorer) place(i uint32, n *node) {
	w, c := r.w, &r.slot
	d := n.due
	if c.s == 0 || d < c.lo || d-c.lo >= c.gran {
		if !r.findSlot(d) {
			w.place(i)
			return
		}
	}
	t := c.head.wprev
	n.wnext, n.wprev = c.s, t
	w.nodes.get(t).wnext = i
	c.head.wprev = i
}

// findSlot caches the slot of level 1 or higher that due tick d goes to,
// or reports false when it goes to level 0 or the overflow list.
func (r *Restorer) findSlot(d uint64) bool {
	w := r.w
	if rel := d - w.blockStart[0]; w.span[0] == 0 || rel < w.span[0] {
		return false
	}
	for k := 1; k < w.levels; k++ {
		rel := d - w.blockStart[k]
		if sp := w.span[k]; sp != 0 && rel >= sp {
			continue
		}
		q := w.digit(rel, k)
		s := w.sentinel(k, q)
		r.slot = slotCache{lo: w.blockStart[k] + q*w.gran[k], gran: w.gran[k], s: s, head: w.nodes.get(s)}
		w.occupied[k][q>>6] |= 1 << (q & 63)
		return true
	}
	return false
}

// sortRestored ends the records of a version 3 snapshot: it sorts the
// due timers into add order, and sets the wheel's next seq after the
// highest read. Two due timers with the same seq are an error.
func (r *Restorer) sortRestored() error {
	w := r.w
	var a []uint64
	for _, i := range r.dueNodes {
		a = append(a, uint64(w.nodes.get(i).order())<<32|uint64(i))
	}
	if err := sortDistinct(a, "due timer"); err != nil {
		return err
	}
	r.dueNodes = make([]uint32, len(a))
	for j, e := range a {
		r.dueNodes[j] = uint32(e)
	}
	r.dueSeen = make([]uint64, (len(a)+63)/64)
	if r.anySeq {
		w.seq = r.maxSeq + 1 // Add renumbers first when this is past seqMax
	}
	return nil
}

// sortLists puts the receivers' lists the index builder noted unsorted
// in add order, newest first, once the builder has linked every timer.
// Two timers of one receiver with the same seq are an error.
// It gathers their timers in one pass over the slab in index order (a
// restore fills the slab densely, every node below its high-water mark
// live), sorts each receiver's by seq, and relinks them: a walk of each
// list, as before, took a dependent cache miss a node, and a snapshot
// written while the wheel took adds leaves nearly every receiver's list out
// of order (each add's first write to its receiver's newest node is saved
// by the write barrier and encoded out of slab order), so a restore of one
// at 87.5M timers spent minutes here (BenchmarkRestoreWrittenWhileAdding).
func (r *Restorer) sortLists() error {
	unsorted := r.ib.unsorted
	r.ib.unsorted = nil
	r.resorted += len(unsorted)
	if len(unsorted) == 0 {
		return nil
	}
	w := r.w
	idx := make(map[uint64]int32, len(unsorted))
	recvs := make([]uint64, 0, len(unsorted))
	lists := make([][]uint64, 0, len(unsorted))
	for recv := range unsorted {
		idx[recv] = int32(len(lists))
		recvs = append(recvs, recv)
		lists = append(lists, make([]uint64, 0, w.recv.entry(recv).count))
	}
	var scratch []uint64 // sortDistinctBuf's
	last, lastK := uint64(0), int32(-1)
	for i := w.nodes.nsent; i < w.nodes.n; i++ { // (below nsent: the lists' sentinels)
		n := w.nodes.get(i)
		k := lastK
		if n.receiver != last || k < 0 {
			var ok bool
			if k, ok = idx[n.receiver]; !ok {
				k = -1
			}
			last, lastK = n.receiver, k
		}
		if k >= 0 {
			lists[k] = append(lists[k], uint64(n.order())<<32|uint64(i))
		}
	}
	for k, a := range lists {
		if err := sortDistinctBuf(a, &scratch, "receiver"); err != nil {
			return err
		}
		next := nilIdx // newest first: the highest seq at the head
		for _, e := range a {
			i := uint32(e)
			n := w.nodes.get(i)
			n.rnext, n.rprev = next, nilIdx
			if next != nilIdx {
				w.nodes.get(next).rprev = i
			}
			next = i
		}
		w.recv.entry(recvs[k]).head = next
		lists[k] = nil
	}
	return nil
}

// sortDistinct sorts a, entries seq<<32|node, and fails if two have the
// same seq.
func sortDistinct(a []uint64, what string) error {
	var scratch []uint64
	return sortDistinctBuf(a, &scratch, what)
}

// sortDistinctBuf is sortDistinct with a scratch buffer, grown as needed
// and kept for the next call: a slice of more than radixMin entries is
// sorted by its seqs with a radix sort (radixSortSeq), which took a
// churned wheel's lists (most of them far out of slab order) at 10M
// timers from 45 to ~10 ns a timer, where slices.Sort compared each.
func sortDistinctBuf(a []uint64, scratch *[]uint64, what string) error {
	if len(a) > radixMin {
		if cap(*scratch) < len(a) {
			*scratch = make([]uint64, len(a))
		}
		radixSortSeq(a, (*scratch)[:len(a)])
	} else {
		slices.Sort(a)
	}
	for j := 1; j < len(a); j++ {
		if a[j]>>32 == a[j-1]>>32 {
			return fmt.Errorf("%w: two timers (%s) have seq %d", ErrSnapshot, what, a[j]>>32)
		}
	}
	return nil
}

// radixMin is the length above which sortDistinctBuf sorts with radixSortSeq.
const radixMin = 256

// radixSortSeq sorts a, entries seq<<32|node with seq below 2^31, by seq
// (stable: entries of one seq keep their order, which sortDistinctBuf
// refuses anyway), with tmp as scratch of a's length: an LSD radix sort
// of 11, 11 and 9 bits of the seq, a pass skipped when every entry has
// the same digit (a list's seqs often span less than 2^22).
func radixSortSeq(a, tmp []uint64) {
	src, dst := a, tmp
	for shift := uint(32); shift < 63; shift += 11 {
		var count [1 << 11]int
		for _, e := range src {
			count[e>>shift&(1<<11-1)]++
		}
		if count[src[0]>>shift&(1<<11-1)] == len(src) {
			continue
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for _, e := range src {
			d := e >> shift & (1<<11 - 1)
			dst[count[d]] = e
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &a[0] {
		copy(a, src)
	}
}
