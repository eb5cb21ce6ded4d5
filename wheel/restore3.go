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
	i, _ := w.nodes.alloc() // the header checked the count
	// The wheel being restored has never been frozen: no page is shared, so
	// the nodes are written through get, without at's write barrier check.
	n := w.nodes.get(i)
	n.receiver, n.tid, n.seq, n.repeat, n.fired = t.key.Receiver, t.key.Tid, t.seq, t.repeat, uint32(t.fired)
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
		w.place(i)
	}
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
