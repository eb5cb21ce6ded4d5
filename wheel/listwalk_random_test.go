package wheel

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// TestStepPageRandomInterleavings: page walks of a receiver, 1-8 units of
// work a step (sometimes more, or less than one), with random changes
// between the steps and between the pages: adds (plain and Replace),
// cancels, CancelAll, fires, renumbers of the add order (a small seqMax),
// ListPage of other receivers (as session/bulk.go's, which note and keep
// their own sorted tids) and of the walked one, walks of others begun and
// abandoned, and restarts. Each page holds only live timers of the
// receiver, with the data Get gives, ascending, distinct, at or past from,
// at most n; every timer present throughout with a tid in [from, hi] is
// in it; each step does at most its budget (the sort aside) and the last
// at most max(budget, n). WHEEL_PAGE_SEEDS and WHEEL_PAGE_SEED_BASE run
// other seeds (40,000 passed).
func TestStepPageRandomInterleavings(t *testing.T) {
	seeds, base := envInt("WHEEL_PAGE_SEEDS", 300), envInt("WHEEL_PAGE_SEED_BASE", 0)
	if testing.Short() {
		seeds = 50
	}
	served := 0
	for seed := uint64(base); seed < uint64(base+seeds); seed++ {
		f := newPageFuzz(t, seed)
		for round := range 10 {
			served += f.page(round)
		}
	}
	if seeds >= 300 && served < seeds {
		t.Errorf("%d pages served from kept sorted tids in %d seeds: too few to test that path", served, seeds)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// pageFuzz is one seed's wheel, receiver fuzzR with others beside it, and
// a model of every timer's data.
type pageFuzz struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	w       *Wheel
	m       int // timers added to each at first
	burn    int // adds and cancels that use the add order up, per change of that kind
	addP    int // adds to r between steps, out of 10
	model   map[Key][]byte
	ctr     uint64
	gone    map[uint64]bool // tids of r removed since the page began
	touched bool            // a timer of r added since the page began
	start   map[uint64]bool
	steps   int // since the walk began
	from    uint64
	n       int
}

const fuzzR = 5

var fuzzOthers = []uint64{6, 7}

func newPageFuzz(t *testing.T, seed uint64) *pageFuzz {
	rng := rand.New(rand.NewPCG(seed, 13))
	f := &pageFuzz{t: t, seed: seed, rng: rng, w: newWheel(t, 0, Config{}), model: map[Key][]byte{}}
	f.w.pageMin = uint32(1 + rng.IntN(16))
	f.w.buildMax = [...]uint32{uint32(rng.IntN(64)), uint32(rng.IntN(1000)), 1 << 20}[rng.IntN(3)]
	f.m = 1 + rng.IntN(300)
	switch rng.IntN(3) {
	case 0:
		f.w.seqMax = uint32(f.m + rng.IntN(f.m+40)) // renumbers often
	case 1:
		f.w.seqMax = uint32(2*f.m + 50 + rng.IntN(4*f.m))
		f.burn = rng.IntN(60)
	}
	for range f.m {
		_ = f.add(Key{fuzzR, f.tid()}, false)
		_ = f.add(Key{fuzzOthers[rng.IntN(2)], f.tid()}, false)
	}
	f.addP = []int{0, 0, 1, 3, 10}[rng.IntN(5)]
	return f
}

func (f *pageFuzz) tid() uint64 {
	if f.rng.IntN(25) == 0 {
		return math.MaxUint64 - uint64(f.rng.IntN(3))
	}
	return uint64(f.rng.IntN(2 * f.m))
}

// add adds k, with data that names it and the add, sometimes repeating.
func (f *pageFuzz) add(k Key, replace bool) error {
	f.ctr++
	sp := Spec{After: 1 + uint64(f.rng.IntN(40)), Replace: replace}
	if f.rng.IntN(3) == 0 {
		sp.Every = uint64(1 + f.rng.IntN(9))
	}
	if f.rng.IntN(2) == 0 {
		sp.Data = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(
			binary.LittleEndian.AppendUint64(nil, k.Receiver), k.Tid), f.ctr)
	}
	err := f.w.Add(k, sp)
	if err == nil {
		f.model[k] = sp.Data
	}
	return err
}

// page walks one page with random changes between its steps and checks
// it. It reports whether the page was served from kept sorted tids.
func (f *pageFuzz) page(round int) (served int) {
	rng, w := f.rng, f.w
	f.n = [...]int{1 << 30, 1, 1 + rng.IntN(f.m+3), 1 + rng.IntN(f.m+3)}[rng.IntN(4)]
	f.from = [...]uint64{0, math.MaxUint64 - uint64(rng.IntN(2)), f.tid(), f.tid()}[rng.IntN(4)]
	budget := 1 + rng.IntN(8)
	switch rng.IntN(20) {
	case 0:
		budget = math.MaxInt
	case 1:
		budget = -rng.IntN(3) // (at least one unit)
	case 2:
		budget = 1 + rng.IntN(200)
	}
	if rng.IntN(4) == 0 { // a ListPage of r first: notes or builds its tids
		w.ListPage(fuzzR, 0, 1+rng.IntN(5), nil)
	}
	if rng.IntN(5) == 0 { // a walk of another receiver, abandoned part-way
		w.BeginPage(fuzzOthers[rng.IntN(2)], 0, 1+rng.IntN(20))
		for range rng.IntN(4) {
			w.StepPage(budget, nil)
		}
	}
	if round > 0 {
		f.gone = map[uint64]bool{}
		for range rng.IntN(3) {
			f.between() // changes between pages too
		}
	}
	if l, ok := w.recv.get(fuzzR); ok && w.page.valid(w, fuzzR, l) {
		served = 1
	}
	f.begin()
	for {
		if f.steps++; f.steps > 2*len(f.start)+8+3*f.m {
			f.t.Fatalf("seed %d round %d: %d steps, no end", f.seed, round, f.steps)
		}
		sortMax := 0
		if w.walk.build {
			sortMax = sortWork(len(w.walk.tids) + max(budget, 1))
		}
		p, resume, done := w.StepPage(budget, nil)
		if done {
			if lw := w.ListWork(); lw > max(budget, f.n, 1) {
				f.t.Fatalf("seed %d round %d: the last call did %d (budget %d, n %d)", f.seed, round, lw, budget, f.n)
			}
			f.check(round, p, resume)
			return served
		}
		if lw := w.ListWork(); lw > max(budget, 1)+sortMax || lw < 1 {
			f.t.Fatalf("seed %d round %d: a call did %d (budget %d, sort %d)", f.seed, round, lw, budget, sortMax)
		}
		f.between()
	}
}

// begin (re)starts the walk of the page.
func (f *pageFuzz) begin() {
	f.start, f.gone, f.touched, f.steps = liveSet(f.w, fuzzR), map[uint64]bool{}, false, 0
	f.w.BeginPage(fuzzR, f.from, f.n)
}

// between makes up to five random changes.
func (f *pageFuzz) between() {
	rng, w := f.rng, f.w
	for range rng.IntN(6) {
		k := Key{Receiver: fuzzR, Tid: f.tid()}
		switch rng.IntN(12) {
		case 0, 1:
			if w.Cancel(k) == nil {
				f.gone[k.Tid] = true
			}
		case 2, 3:
			if rng.IntN(10) < f.addP && f.add(k, rng.IntN(2) == 0) == nil {
				f.touched, f.gone[k.Tid] = true, true // (replaced: a new timer)
			}
		case 4:
			w.Advance(w.Now()+uint64(1+rng.IntN(3)), math.MaxInt, func(fi *Fire) {
				if fi.Receiver == fuzzR && fi.Last {
					f.gone[fi.Tid] = true
				}
			})
		case 5:
			_ = w.Cancel(Key{fuzzOthers[rng.IntN(2)], f.tid()})
			for range f.burn { // the add order used up, the live count kept: renumbers
				if k := (Key{99, uint64(rng.IntN(1 << 30))}); f.add(k, false) == nil {
					_ = w.Cancel(k)
				}
			}
		case 6, 7:
			_ = f.add(Key{fuzzOthers[rng.IntN(2)], f.tid()}, rng.IntN(2) == 0)
		case 8: // other receivers paged (bulk.go's ListPage): notes, builds, serves
			o := fuzzOthers[rng.IntN(2)]
			for range 1 + rng.IntN(3) {
				w.ListPage(o, f.tid(), 1+rng.IntN(10), nil)
			}
		case 9:
			w.ListPage(fuzzR, f.tid(), 1+rng.IntN(10), nil)
		case 10:
			f.cancelAll()
		case 11:
			if rng.IntN(15) == 0 { // restart the walk
				w.EndPage()
				f.begin()
			}
		}
	}
}

func (f *pageFuzz) cancelAll() {
	switch {
	case f.rng.IntN(20) == 0:
		f.w.CancelAll(fuzzOthers[f.rng.IntN(2)])
	case f.rng.IntN(40) == 0:
		for tid := range liveSet(f.w, fuzzR) {
			f.gone[tid] = true
		}
		f.w.CancelAll(fuzzR)
	}
}

// check checks a page and its resume tid (see the test's comment).
func (f *pageFuzz) check(round int, page []Info, resume uint64) {
	t, w, from, n := f.t, f.w, f.from, f.n
	end, tids := liveSet(w, fuzzR), tidsOf(page)
	for _, in := range page { // the views, before anything changes
		g, err := w.Get(in.Key)
		if err != nil || in.Receiver != fuzzR || !end[in.Tid] || in.Tid < from {
			t.Fatalf("seed %d round %d: %v in the page is not a live timer of r at or past %d", f.seed, round, in.Key, from)
		}
		if !slices.Equal(in.Data, g.Data) || in.Due != g.Due || in.Fired != g.Fired || in.Every != g.Every ||
			!slices.Equal(in.Data, f.model[in.Key]) {
			t.Fatalf("seed %d round %d: %v: page %+v, Get %+v, data added %x", f.seed, round, in.Key, in, g, f.model[in.Key])
		}
	}
	if len(tids) > n || !slices.IsSorted(tids) || len(slices.Compact(slices.Clone(tids))) != len(tids) {
		t.Fatalf("seed %d round %d: n %d, not ascending and distinct: %v", f.seed, round, n, tids)
	}
	hi := uint64(math.MaxUint64)
	switch {
	case len(tids) == n:
		hi = tids[n-1]
		if resume != 0 {
			t.Fatalf("seed %d round %d: a full page with resume %d", f.seed, round, resume)
		}
	case resume != 0:
		hi = resume - 1
		if len(tids) > 0 && resume <= tids[len(tids)-1] {
			t.Fatalf("seed %d round %d: resume %d <= the last tid %d", f.seed, round, resume, tids[len(tids)-1])
		}
	}
	for tid := range f.start {
		if !f.gone[tid] && end[tid] && tid >= from && tid <= hi && !slices.Contains(tids, tid) {
			t.Fatalf("seed %d round %d: tid %d lived throughout, not in the page (from %d, n %d, hi %d, resume %d)", f.seed, round, tid, from, n, hi, resume)
		}
	}
	if lp := tidsOf(w.ListPage(fuzzR, from, n, nil)); len(f.gone) == 0 && !f.touched && !slices.Equal(lp, tids) {
		t.Fatalf("seed %d round %d: page %v, ListPage %v", f.seed, round, tids, lp)
	}
}
