package wheel

import (
	"cmp"
	"math/bits"
	"slices"
)

// ListPage appends to dst the timers of receiver r whose tid is at least
// from, in ascending tid order, and returns the extended slice: the n
// smallest such tids, or all of them when there are fewer. n <= 0, or a
// receiver with no timers, appends nothing.
//
// To page through a receiver, start with from = 0 and continue from the last
// tid returned plus one, until fewer than n come back (or the last tid is
// 2^64-1, which has no successor). Timers added or removed between pages are
// seen or not according to their tid: a page never repeats a tid of an
// earlier one, and a timer present throughout is seen exactly once.
//
// Cost: one walk of r's timers, O(ReceiverLen(r) + n log n) whatever order
// the tids were added in, and no allocation once dst and the wheel's
// scratch buffer (at most 2 × min(n, ReceiverLen(r)) entries of 16 bytes)
// have grown. Each Info's Data is a view into the wheel, valid until its
// next modifying call, as with Get.
func (w *Wheel) ListPage(r, from uint64, n int, dst []Info) []Info {
	l, ok := w.recv.get(r)
	if !ok || n <= 0 {
		return dst
	}
	n = min(n, int(l.count))
	// Candidates collect in buf. When it holds 2n, the n smallest are kept
	// and the largest of them becomes a bound that later tids must beat:
	// each compaction is linear in n and removes n candidates, so the walk
	// stays linear even when every tid is a candidate (tids added in
	// ascending order, walked newest first).
	buf := w.pageBuf[:0]
	if cap(buf) < 2*n {
		buf = make([]tidRef, 0, 2*n)
	}
	bound, bounded := uint64(0), false
	for i := l.head; i != nilIdx; {
		nd := w.nodes.at(i)
		if t := nd.tid; t >= from && (!bounded || t < bound) {
			if len(buf) == 2*n {
				selectSmallest(buf, n)
				buf = buf[:n]
				bound, bounded = buf[n-1].tid, true
			}
			if !bounded || t < bound {
				buf = append(buf, tidRef{t, i})
			}
		}
		i = nd.rnext
	}
	if len(buf) > n {
		selectSmallest(buf, n)
		buf = buf[:n]
	}
	slices.SortFunc(buf, func(a, b tidRef) int { return cmp.Compare(a.tid, b.tid) })
	for _, e := range buf {
		dst = append(dst, w.info(e.i))
	}
	w.pageBuf = buf[:0]
	return dst
}

// tidRef is a timer's tid and node index, a ListPage candidate.
type tidRef struct {
	tid uint64
	i   uint32
}

// selectSmallest reorders a (distinct tids, len(a) >= k >= 1) so that a[:k]
// holds its k smallest tids with the largest of them at a[k-1]: quickselect
// with a median-of-three pivot, falling back to a sort when the partitions
// keep coming out lopsided, so it is linear on average and O(m log m) at
// worst.
func selectSmallest(a []tidRef, k int) {
	lo, hi := 0, len(a) // the k-1'th smallest is in a[lo:hi]
	for budget := 2 * bits.Len(uint(len(a))); hi-lo > 8; budget-- {
		if budget == 0 {
			break
		}
		m := lo + (hi-lo)/2
		// Median of three to a[hi-1], as the pivot.
		if a[m].tid < a[lo].tid {
			a[m], a[lo] = a[lo], a[m]
		}
		if a[hi-1].tid < a[lo].tid {
			a[hi-1], a[lo] = a[lo], a[hi-1]
		}
		if a[m].tid < a[hi-1].tid {
			a[m], a[hi-1] = a[hi-1], a[m]
		}
		p := a[hi-1].tid
		j := lo
		for i := lo; i < hi-1; i++ {
			if a[i].tid < p {
				a[i], a[j] = a[j], a[i]
				j++
			}
		}
		a[j], a[hi-1] = a[hi-1], a[j] // the pivot, in its final place
		switch {
		case j == k-1:
			return
		case j < k-1:
			lo = j + 1
		default:
			hi = j
		}
	}
	slices.SortFunc(a[lo:hi], func(x, y tidRef) int { return cmp.Compare(x.tid, y.tid) })
}
