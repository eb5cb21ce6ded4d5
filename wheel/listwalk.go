package wheel

import (
	"cmp"
	"math"
	"slices"
)

// A page walk is ListPage spread over calls: BeginPage starts it, and each
// StepPage does at most a budget of work, so that the first page of a
// receiver with m timers costs O(m) in all but never more than the budget
// in one call. A unit of work is a timer visited in the receiver's list,
// a tid looked up in the index, or a timer put in the page: each is a
// cache miss in a slab of gigabytes at 100M timers, and on a cold cache
// (the first list after an idle spell; this VM, docs/BENCHMARKS.md, "A
// `list` after idleness") a miss cost up to 6.7 µs: 4,096 of them took
// 27 ms. One walk is in progress at a time; the wheel keeps it valid
// across its modifying calls:
//
//   - a timer added meanwhile goes to the head of its receiver's list, which
//     the walk has passed (or is not among the sorted tids it looks up): it
//     is not seen;
//   - a timer removed meanwhile (cancelled, fired, replaced) before the
//     walk reached it is not seen (when it is the next node to visit the
//     walk moves on to its successor: recvRemove calls walkRemoved; a tid
//     looked up after it left is not found); one removed after the walk
//     took it as a candidate is dropped when the page is made: its node is
//     free then, or holds another timer;
//   - a timer present throughout is seen, so the page is exactly ListPage's
//     for the timers present throughout, with fewer when some of its
//     timers were removed: Resume then says where the next page starts.
//
// The walk goes through phases, each of which may span calls:
//
//  1. walking the receiver's list (from BeginPage; not when the wheel's
//     sorted tids serve the page), collecting candidates, or, when the
//     receiver is being paged (its last walk had no timer added since) and
//     holds at most pageBuildMax timers, every tid;
//  2. with every tid collected: sorting them (in one call, O(m log m),
//     bounded by pageBuildMax) and keeping them in w.page; then, as when
//     w.page served the page from the start, looking the page's tids up,
//     from the first at or past from, until n are found;
//  3. making the page from the candidates: in one call, and in a call of
//     its own when the call has done work already and the page would take
//     it past the budget.
type pageWalk struct {
	active  bool
	build   bool // collecting every tid, for w.page
	serving bool // looking up sorted's tids (phase 2)
	ready   bool // buf holds the page's candidates, ascending (phase 3)
	r, from uint64
	n       int
	cur     uint32 // the next node to visit; nilIdx once the walk is over
	seqAt   uint32 // w.seq when the walk began (0 after a renumber: the tids are not kept)
	bound   uint64 // with bounded: candidates must be below it
	bounded bool
	cut     bool // candidates were left out: timers past the page's last may exist
	buf     []tidRef
	tids    []uint64
	sorted  []uint64 // serving: the receiver's sorted tids (w.page's, or tids when not kept)
	at      int      // serving: the next of sorted to look up
}

// pageBuildMax is the most timers a receiver may have for a walk to sort
// its tids when it ends (a sort of 65,536 tids is a few ms). Wheel.buildMax
// holds it; tests lower it.
const pageBuildMax = 1 << 16

// BeginPage starts a walk for the page ListPage(r, from, n) would return,
// replacing any walk in progress; StepPage goes on with it. It does no
// work itself.
func (w *Wheel) BeginPage(r, from uint64, n int) {
	buf, tids := w.walk.buf[:0], w.walk.tids[:0]
	w.walk = pageWalk{active: true, r: r, from: from, n: n, cur: nilIdx, seqAt: w.seq, buf: buf, tids: tids}
	wk := &w.walk
	l, ok := w.recv.get(r)
	if !ok || n <= 0 {
		wk.ready = true
		return
	}
	if w.page.valid(w, r, l) {
		wk.serve(w.page.tids)
		return
	}
	if l.count >= w.pageMin {
		if w.page.stable(w, r, l) && l.count <= w.buildMax {
			wk.build = true
		} else {
			w.page.note(w, r, l)
		}
	}
	wk.cur = l.head
}

// serve starts phase 2 over sorted.
func (wk *pageWalk) serve(sorted []uint64) {
	wk.serving, wk.sorted = true, sorted
	wk.at, _ = slices.BinarySearch(sorted, wk.from)
}

// looksUp reports whether s shares its array with the sorted tids the walk
// is looking up (which must then not be overwritten).
func (wk *pageWalk) looksUp(s []uint64) bool {
	return wk.serving && cap(s) > 0 && cap(wk.sorted) > 0 && &s[:1][0] == &wk.sorted[:1][0]
}

// StepPage goes on with the walk BeginPage started, doing at most budget
// units of work (at least one), and a sort in phase 2; the call that makes
// the page does at most max(budget, n). It reports whether it is done. When it
// is, it appends the page to dst, in ascending tid order, and ends the
// walk; resume is then 0, or, when timers were removed during the walk
// and the page holds fewer than n although timers past its last tid may
// be left, the tid the next page starts from (greater than every tid in
// the page). Without a walk it appends nothing and reports done. ListWork
// reports the work the call did (a sort counted as in ListPage).
// Each Info's Data is a view into the wheel, as with Get.
func (w *Wheel) StepPage(budget int, dst []Info) (page []Info, resume uint64, done bool) {
	wk := &w.walk
	w.listWork = 0
	if !wk.active {
		return dst, 0, true
	}
	budget = max(budget, 1)
	for !wk.ready {
		switch {
		case wk.cur != nilIdx:
			w.walkStep(budget - w.listWork)
		case wk.serving:
			w.serveStep(budget - w.listWork)
		case wk.build:
			w.endBuild()
		default:
			w.endWalk()
		}
		if w.listWork >= budget && !wk.ready {
			return dst, 0, false
		}
	}
	if w.listWork > 0 && w.listWork+len(wk.buf) > budget {
		return dst, 0, false // the page is made in a call of its own
	}
	dst, resume = w.makePage(dst)
	w.EndPage()
	return dst, resume, true
}

// EndPage ends the walk in progress, if any (its page is not wanted).
func (w *Wheel) EndPage() {
	buf, tids := w.walk.buf[:0], w.walk.tids[:0]
	if cap(tids) > 4*pageBuildMax {
		tids = nil
	}
	w.walk = pageWalk{cur: nilIdx, buf: buf, tids: tids}
}

// walkStep visits at most budget (> 0) timers of the receiver's list.
func (w *Wheel) walkStep(budget int) {
	wk := &w.walk
	visits := 0
	for ; wk.cur != nilIdx && visits < budget; visits++ {
		nd := w.nodes.get(wk.cur)
		if wk.build {
			wk.tids = append(wk.tids, nd.tid)
		} else if t := nd.tid; t >= wk.from && (!wk.bounded || t < wk.bound) {
			wk.candidate(t, wk.cur)
		}
		wk.cur = nd.rnext
	}
	w.listWork += visits
}

// candidate offers tid t at node i, at or past from and below the bound:
// as in walkPage, when buf holds 2n the n smallest are kept and the
// largest of them becomes the bound.
func (wk *pageWalk) candidate(t uint64, i uint32) {
	if len(wk.buf) == 2*wk.n {
		selectSmallest(wk.buf, wk.n)
		wk.buf = wk.buf[:wk.n]
		wk.bound, wk.bounded, wk.cut = wk.buf[wk.n-1].tid, true, true
		if t >= wk.bound {
			return
		}
	}
	wk.buf = append(wk.buf, tidRef{t, i})
}

// endWalk ends phase 1 of a walk that collected candidates: the n
// smallest, ascending, are the page's.
func (w *Wheel) endWalk() {
	wk := &w.walk
	if len(wk.buf) > wk.n {
		selectSmallest(wk.buf, wk.n)
		wk.buf, wk.cut = wk.buf[:wk.n], true
	}
	slices.SortFunc(wk.buf, func(a, b tidRef) int { return cmp.Compare(a.tid, b.tid) })
	wk.ready = true // (at most 2n tidRefs in a buffer of the walk's, not the slab: no work charged)
}

// endBuild sorts the collected tids, keeps them in w.page (unless the
// add order was renumbered during the walk: a later page could not tell
// whether timers were added since) and serves the page from them.
func (w *Wheel) endBuild() {
	wk := &w.walk
	tids := wk.tids
	slices.Sort(tids)
	w.listWork += sortWork(len(tids))
	wk.build = false
	if wk.seqAt == 0 {
		wk.serve(tids)
		return
	}
	wk.tids = w.page.tids[:0] // (the old buffer is the next walk's)
	w.page = pageIndex{r: wk.r, seqAt: wk.seqAt, built: true, count: uint32(len(tids)), tids: tids}
	wk.serve(tids)
}

// serveStep looks up at most budget (> 0) of the sorted tids, the page's
// candidates, until n are found or none is left.
func (w *Wheel) serveStep(budget int) {
	wk := &w.walk
	looks := 0
	for ; wk.at < len(wk.sorted) && len(wk.buf) < wk.n && looks < budget; looks++ {
		t := wk.sorted[wk.at]
		if _, i := w.index.lookup(Key{wk.r, t}); i != 0 {
			wk.buf = append(wk.buf, tidRef{t, i})
		}
		wk.at++
	}
	w.listWork += looks
	if len(wk.buf) == wk.n || wk.at == len(wk.sorted) {
		wk.cut = wk.at < len(wk.sorted)
		wk.serving, wk.sorted, wk.ready = false, nil, true
	}
}

// makePage appends the page, from the candidates in buf, to dst. A
// candidate removed since it was taken left its node free, or reused by
// another timer: the node, which the page reads anyway, says so, and the
// candidate is dropped (a timer that replaced it under the same key in
// the same node is live, and kept). No look-up: the call does at most n.
func (w *Wheel) makePage(dst []Info) ([]Info, uint64) {
	wk := &w.walk
	buf := wk.buf
	kept := 0
	for _, e := range buf {
		if nd := w.nodes.get(e.i); nd.wprev == markFree || nd.wprev == markFiring || nd.receiver != wk.r || nd.tid != e.tid {
			continue
		}
		dst = append(dst, w.info(e.i))
		kept++
	}
	w.listWork += len(buf)
	var resume uint64
	if kept < wk.n && wk.cut && len(buf) > 0 && buf[len(buf)-1].tid != math.MaxUint64 {
		resume = buf[len(buf)-1].tid + 1
	}
	wk.buf = buf[:0]
	return dst, resume
}

// walkRemoved keeps the walk valid as node i of receiver r leaves r's
// list (called by recvRemove before it unlinks i).
func (w *Wheel) walkRemoved(r uint64, i uint32, next uint32) {
	if w.walk.r != r {
		return
	}
	if w.walk.cur == i {
		w.walk.cur = next
	}
}

// sortWork is what a sort of m entries is charged: m per doubling.
func sortWork(m int) int {
	work := 0
	for s := m; s > 1; s >>= 1 {
		work += m
	}
	return work
}
