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
// list gets it at the head, or after a few newer timers (linkRecv), and a
// receiver whose list this leaves out of add order is noted and sorted
// once the records are read (sortRestored), with the due timers.

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
	r.linkRecv(t.key.Receiver, i, t.seq)
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

// recvWalkMax is how many newer timers linkRecv passes, at most, to put a
// timer in its place in its receiver's list.
const recvWalkMax = 8

// linkRecv links node i, of seq seq, into recv's list (see recvAppend),
// in add order: at the head when it is the receiver's newest so far, else
// after the newer timers at the list's head, when there are at most
// recvWalkMax of them; otherwise at the head, the list noted unsorted
// (sortLists sorts it). A snapshot written while the wheel took adds has
// a few timers of a receiver ahead of its place in slab order (the nodes
// the write barrier saved, the receiver's newest among them): the
// records after such a one are older, and each goes in one or two nodes
// down the list, where noting the receiver unsorted had sortLists gather
// and relink every timer of nearly every receiver (84 ns a timer at 10M,
// BenchmarkRestoreWrittenWhileAdding). The nodes passed were linked
// recently: they are in the cache.
func (r *Restorer) linkRecv(recv uint64, i, seq uint32) {
	w := r.w
	l := w.recv.ref(recv)
	n := w.nodes.get(i)
	n.rprev, n.rnext = nilIdx, nilIdx
	if l.count != 0 {
		h := w.nodes.get(l.head)
		if h.order() >= seq && r.linkAfterNewer(l.head, h, i, n, seq) {
			l.count++
			return
		}
		n.rnext, h.rprev = l.head, i
		if h.order() >= seq {
			r.noteUnsorted(recv)
		}
	}
	l.head = i
	l.count++
}

// linkAfterNewer links node i (n), of seq seq, after the newer timers at
// the start of the list whose head is p (h, newer than seq), before the
// first older one or at the end, and reports true; or reports false, and
// links nothing, when it would pass more than recvWalkMax timers or meets
// one of seq seq (sortLists then reports the two).
func (r *Restorer) linkAfterNewer(p uint32, h *node, i uint32, n *node, seq uint32) bool {
	if h.order() == seq {
		return false
	}
	for range recvWalkMax {
		q := h.rnext
		if q != nilIdx {
			qn := r.w.nodes.get(q)
			if o := qn.order(); o > seq {
				p, h = q, qn
				continue
			} else if o == seq {
				return false
			}
			qn.rprev = i
		}
		h.rnext, n.rprev, n.rnext = i, p, q
		return true
	}
	return false
}

// noteUnsorted notes that recv's list is not in add order (sortRestored
// sorts it).
func (r *Restorer) noteUnsorted(recv uint64) {
	if r.unsorted == nil {
		r.unsorted = make(map[uint64]struct{})
	}
	r.unsorted[recv] = struct{}{}
}

// sortRestored ends the records of a version 3 snapshot: it sorts the
// noted receivers' lists and the due timers into add order, and sets the
// wheel's next seq after the highest read. Two timers of one receiver, or
// two due ones, with the same seq are an error.
func (r *Restorer) sortRestored() error {
	w := r.w
	if err := r.sortLists(); err != nil {
		return err
	}
	r.unsorted = nil
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

// sortLists puts the noted receivers' lists in add order, newest first.
// It gathers their timers in one pass over the slab in index order (a
// restore fills the slab densely, every node below its high-water mark
// live), sorts each receiver's by seq, and relinks them: a walk of each
// list, as before, took a dependent cache miss a node, and a snapshot
// written while the wheel took adds leaves nearly every receiver's list out
// of order (each add's first write to its receiver's newest node is saved
// by the write barrier and encoded out of slab order), so a restore of one
// at 87.5M timers spent minutes here (BenchmarkRestoreWrittenWhileAdding).
func (r *Restorer) sortLists() error {
	r.resorted += len(r.unsorted)
	if len(r.unsorted) == 0 {
		return nil
	}
	w := r.w
	idx := make(map[uint64]int32, len(r.unsorted))
	recvs := make([]uint64, 0, len(r.unsorted))
	lists := make([][]uint64, 0, len(r.unsorted))
	for recv := range r.unsorted {
		idx[recv] = int32(len(lists))
		recvs = append(recvs, recv)
		lists = append(lists, make([]uint64, 0, w.recv.entry(recv).count))
	}
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
		if err := sortDistinct(a, "receiver"); err != nil {
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
	slices.Sort(a)
	for j := 1; j < len(a); j++ {
		if a[j]>>32 == a[j-1]>>32 {
			return fmt.Errorf("%w: two timers (%s) have seq %d", ErrSnapshot, what, a[j]>>32)
		}
	}
	return nil
}
