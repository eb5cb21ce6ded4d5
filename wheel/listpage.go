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
// Cost: a page of a receiver paged before, with no timer added to it since,
// costs O(log m + n + timers removed in the page's range) for m timers: the
// wheel keeps the sorted tids of the last receiver it paged (8 bytes a
// timer). Otherwise one walk of r's timers, O(m + n log n) whatever order
// the tids were added in, and when the receiver had no timer added since
// its previous page, a sort of its tids (O(m log m), once) for the pages
// that follow. The wheel keeps the tids of one receiver with at least
// pageIndexMin timers: two such receivers paged in turn are walked each
// time. ListWork reports the timers a call walked. No allocation
// once dst, the wheel's scratch buffer (at most 2 × min(n, m) entries of
// 16 bytes) and the sorted tids have grown. Each Info's Data is a view into
// the wheel, valid until its next modifying call, as with Get.
func (w *Wheel) ListPage(r, from uint64, n int, dst []Info) []Info {
	w.listWork = 0
	l, ok := w.recv.get(r)
	if !ok || n <= 0 {
		return dst
	}
	if w.page.valid(w, r, l) {
		return w.page.list(w, r, from, n, dst)
	}
	if l.count >= w.pageMin { // (a small receiver's walk is cheap: it leaves p alone)
		if w.page.stable(w, r, l) {
			w.page.build(w, r, l)
			return w.page.list(w, r, from, n, dst)
		}
		w.page.note(w, r, l)
	}
	return w.walkPage(l, from, n, dst)
}

// ListWork returns how many timers the last ListPage walked (each entry
// of a sort counted once more per doubling of its size): the cost the
// caller may charge.
func (w *Wheel) ListWork() int { return w.listWork }

// walkPage is ListPage by one walk of r's list l.
func (w *Wheel) walkPage(l recvList, from uint64, n int, dst []Info) []Info {
	n = min(n, int(l.count))
	w.listWork = int(l.count)
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
		nd := w.nodes.get(i)
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

// pageIndexMin is the fewest timers a receiver must have for ListPage to
// keep its sorted tids: below it a walk is cheap. (Wheel.pageMin holds
// it; tests lower it.)
const pageIndexMin = 4096

// pageIndex is ListPage's memory of the receiver it last paged: its tids
// in ascending order, as of when no timer had been added to it since
// seqAt (the wheel's next add sequence number then). A timer added to the
// receiver since would be its list's head (newest first) with a sequence
// number at or past seqAt, which is how a page sees the tids are stale;
// removed ones are skipped (each tid is looked up in the index). renumber
// drops it. It is no state: it changes what a page costs, never what it
// holds.
type pageIndex struct {
	r     uint64
	seqAt uint32
	built bool     // tids is the receiver's sorted tids (else only r and seqAt are noted)
	count uint32   // the receiver's timers when tids was built
	tids  []uint64 // sorted
	noted bool     // r and seqAt are from a walk (stable compares with them)
}

// fresh reports whether receiver r, whose list is l, had no timer added
// since p noted it.
func (p *pageIndex) fresh(w *Wheel, r uint64, l recvList) bool {
	return p.r == r && w.nodes.get(l.head).order() < p.seqAt
}

// valid reports whether p's sorted tids serve a page of r: no timer was
// added to r since they were taken, and fewer than half of them are gone.
func (p *pageIndex) valid(w *Wheel, r uint64, l recvList) bool {
	return p.built && p.fresh(w, r, l) && l.count >= p.count/2
}

// stable reports whether the last walk was of r, with no timer added to
// it since: paging is under way, and a sort pays for itself.
func (p *pageIndex) stable(w *Wheel, r uint64, l recvList) bool {
	return p.noted && p.fresh(w, r, l)
}

// note remembers a walk of r (and forgets the sorted tids of another).
func (p *pageIndex) note(w *Wheel, r uint64, l recvList) {
	if p.r != r || p.built {
		p.tids = p.tids[:0]
		if cap(p.tids) > 2*int(l.count) {
			p.tids = nil // a large receiver's memory is not kept for a small one
		}
	}
	p.r, p.seqAt, p.built, p.noted = r, w.seq, false, true
}

// build sorts r's tids.
func (p *pageIndex) build(w *Wheel, r uint64, l recvList) {
	tids := p.tids[:0]
	if w.walk.looksUp(tids) {
		tids = nil // (the walk in progress reads them)
	}
	for i := l.head; i != nilIdx; {
		nd := w.nodes.get(i)
		tids = append(tids, nd.tid)
		i = nd.rnext
	}
	slices.Sort(tids)
	*p = pageIndex{r: r, seqAt: w.seq, built: true, count: l.count, tids: tids}
	w.listWork = len(tids) * bits.Len(uint(len(tids)))
}

// list is ListPage from p's sorted tids.
func (p *pageIndex) list(w *Wheel, r, from uint64, n int, dst []Info) []Info {
	at, _ := slices.BinarySearch(p.tids, from)
	walked := 0
	for ; at < len(p.tids) && n > 0; at++ {
		walked++
		if _, i := w.index.lookup(Key{r, p.tids[at]}); i != 0 {
			dst = append(dst, w.info(i))
			n--
		}
	}
	w.listWork += walked + bits.Len(uint(len(p.tids)))
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
