package wheel

import (
	"cmp"
	"math"
	"slices"
)

// A page walk is ListPage spread over calls: BeginPage starts it, and each
// StepPage visits at most a budget of the receiver's timers, so that the
// first page of a receiver with m timers costs O(m) in all but never more
// than the budget in one call (at 100M timers each visit is a cache miss
// in a slab of gigabytes: a 10,000-timer receiver's walk took 10-25 ms in
// one turn). One walk is in progress at a time; the wheel keeps it valid
// across its modifying calls:
//
//   - a timer added meanwhile goes to the head of its receiver's list, which
//     the walk has passed: it is not seen;
//   - a timer removed meanwhile (cancelled, fired, replaced) before the
//     walk reached it is not seen (when it is the next node to visit the
//     walk moves on to its successor: recvRemove calls walkRemoved); one
//     removed after the walk took it as a candidate is dropped when the
//     page is made, by a look-up of its key;
//   - a timer present throughout is seen, so the page is exactly ListPage's
//     for the timers present throughout, with fewer when some of its
//     timers were removed: Resume then says where the next page starts.
//
// When the receiver's sorted tids are kept (see ListPage), the page is
// made from them at once. When the receiver is being paged (its last walk
// had no timer added since) and holds at most pageBuildMax timers, the
// walk collects its tids and sorts them when it ends (O(m log m) in that
// call, bounded by pageBuildMax), so the next pages cost O(log m + n).
type pageWalk struct {
	active  bool
	served  bool // the page comes from w.page: nothing to walk
	build   bool // collecting every tid, for w.page
	dirty   bool // a timer of r was removed since the walk began
	r, from uint64
	n       int
	cur     uint32 // the next node to visit; nilIdx once the walk is over
	seqAt   uint32 // w.seq when the walk began (0 after a renumber: the tids are not kept)
	bound   uint64 // with bounded: candidates must be below it
	bounded bool
	cut     bool // candidates were left out: timers past the page's last may exist
	buf     []tidRef
	tids    []uint64
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
		return
	}
	if w.page.valid(w, r, l) {
		wk.served = true
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

// StepPage goes on with the walk BeginPage started, visiting at most
// budget timers (at least one), and reports whether it is done. When it
// is, it appends the page to dst, in ascending tid order, and ends the
// walk; resume is then 0, or, when timers were removed during the walk
// and the page holds fewer than n although timers past its last tid may
// be left, the tid the next page starts from (greater than every tid in
// the page). Without a walk it appends nothing and reports done. ListWork
// reports the timers the call visited (a sort counted as in ListPage).
// Each Info's Data is a view into the wheel, as with Get.
func (w *Wheel) StepPage(budget int, dst []Info) (page []Info, resume uint64, done bool) {
	wk := &w.walk
	w.listWork = 0
	if !wk.active {
		return dst, 0, true
	}
	if wk.served {
		dst = w.page.list(w, wk.r, wk.from, wk.n, dst)
		w.EndPage()
		return dst, 0, true
	}
	visits := 0
	for ; wk.cur != nilIdx && visits < max(budget, 1); visits++ {
		nd := w.nodes.get(wk.cur)
		if wk.build {
			wk.tids = append(wk.tids, nd.tid)
		} else if t := nd.tid; t >= wk.from && (!wk.bounded || t < wk.bound) {
			wk.candidate(t, wk.cur)
		}
		wk.cur = nd.rnext
	}
	w.listWork = visits
	if wk.cur != nilIdx {
		return dst, 0, false
	}
	if wk.build {
		dst = w.endBuild(dst)
	} else {
		dst, resume = w.endWalk(dst)
	}
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

// endWalk makes the page from the candidates.
func (w *Wheel) endWalk(dst []Info) ([]Info, uint64) {
	wk := &w.walk
	buf := wk.buf
	if len(buf) > wk.n {
		selectSmallest(buf, wk.n)
		buf, wk.cut = buf[:wk.n], true
	}
	slices.SortFunc(buf, func(a, b tidRef) int { return cmp.Compare(a.tid, b.tid) })
	kept := 0
	for _, e := range buf {
		i := e.i
		if wk.dirty { // (the node may have been removed, and reused)
			if _, i = w.index.lookup(Key{wk.r, e.tid}); i == 0 {
				continue
			}
		}
		dst = append(dst, w.info(i))
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

// endBuild sorts the collected tids, keeps them in w.page (unless the
// add order was renumbered during the walk: a later page could not tell
// whether timers were added since) and makes the page from them, looking
// each up (the removed ones are skipped).
func (w *Wheel) endBuild(dst []Info) []Info {
	wk := &w.walk
	tids := wk.tids
	slices.Sort(tids)
	w.listWork += sortWork(len(tids))
	if wk.seqAt == 0 {
		p := pageIndex{r: wk.r, tids: tids}
		return p.list(w, wk.r, wk.from, wk.n, dst)
	}
	wk.tids = w.page.tids[:0] // (the old buffer is the next walk's)
	w.page = pageIndex{r: wk.r, seqAt: wk.seqAt, built: true, count: uint32(len(tids)), tids: tids}
	return w.page.list(w, wk.r, wk.from, wk.n, dst)
}

// walkRemoved keeps the walk valid as node i of receiver r leaves r's
// list (called by recvRemove before it unlinks i).
func (w *Wheel) walkRemoved(r uint64, i uint32, next uint32) {
	if w.walk.r != r {
		return
	}
	w.walk.dirty = true
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
