package wheel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkPage runs a page walk to its end with the given budget, calling
// between(step) after each step that is not the last, and returns the page,
// its resume tid, and the most work (ListWork) a call that was not the last
// did, and the last.
func walkPage(t *testing.T, w *Wheel, r, from uint64, n, budget int, between func(int)) (page []Info, resume uint64, worst, last int) {
	t.Helper()
	w.BeginPage(r, from, n)
	for step := 0; ; step++ {
		require.Less(t, step, 1_000_000, "the walk does not end")
		page, resume, done := w.StepPage(budget, nil)
		if done {
			return page, resume, worst, w.ListWork()
		}
		worst = max(worst, w.ListWork())
		if between != nil {
			between(step)
		}
	}
}

// TestStepPageBoundsEachCall: the pages of a 100k-timer receiver (walked
// each time: too many to keep its sorted tids) and of a 10k-timer one
// (walked, then walked for its sorted tids, then served from them by
// look-ups), 256 units of work at a time, give what ListPage gives; each
// call but the last does at most 256 (and the sort, once), and the last,
// which makes the page, at most the page. At 100M timers each unit is a
// cache miss, up to 6.7 µs on a cold cache. A single ListPage visits all
// 100k in one call, which is what a loop turn did before; and a page
// served from the sorted tids was looked up in one call.
func TestStepPageBoundsEachCall(t *testing.T) {
	const n, budget = 1001, 256
	for _, m := range []int{100_000, 10_000} {
		w := newWheel(t, 100, Config{})
		rng := rand.New(rand.NewPCG(3, 4))
		for i, p := range rng.Perm(m) {
			require.NoError(t, w.Add(Key{1, uint64(p) * 3}, Spec{After: 1 + uint64(i%5000)}))
		}
		require.NoError(t, w.Add(Key{2, 1}, Spec{After: 3}))

		from := uint64(0)
		var seen []uint64
		for pages := 0; ; pages++ {
			require.Less(t, pages, m)
			var want []uint64
			if m > pageBuildMax {
				want = tidsOf(w.ListPage(1, from, n, nil))
				w.ListPage(2, 0, 1, nil) // (so that the walk, not ListPage's memory, is what is tested)
			} else {
				want = wantPage(w, 1, from, n)
			}
			page, resume, worst, last := walkPage(t, w, 1, from, n, budget, nil)
			require.Equal(t, want, tidsOf(page), "m %d: page from %d", m, from)
			assert.Zero(t, resume)
			sort := 0
			if m <= pageBuildMax && pages == 1 {
				sort = sortWork(m) // the second page's walk sorts the tids for the pages after it
			}
			assert.LessOrEqual(t, worst, budget+sort, "m %d, page %d: a call does at most the budget", m, pages)
			assert.LessOrEqual(t, last, max(budget, n), "m %d, page %d: the call that makes the page does at most the page", m, pages)
			seen = append(seen, tidsOf(page)...)
			if len(page) < n {
				break
			}
			from = page[n-1].Tid + 1
		}
		assert.Len(t, seen, m)
		assert.True(t, slices.IsSorted(seen))
		require.NoError(t, w.Add(Key{1, 1}, Spec{After: 1})) // (the kept tids are stale)
		w.ListPage(1, 0, n, nil)
		assert.Equal(t, m+1, w.ListWork(), "(ListPage itself walks the whole receiver in one call)")
	}
}

// TestStepPageServedByLookups: a page served from the receiver's kept
// sorted tids looks its tids up a budget at a time (each look-up is a cache
// miss at 100M timers), not all in the call that begins it; timers
// cancelled between the calls are not in it, and when that leaves it
// short, the next page starts past its last; another receiver paged
// meanwhile does not overwrite the tids being looked up.
func TestStepPageServedByLookups(t *testing.T) {
	const m, n, budget = 10_000, 1001, 64
	w := newWheel(t, 100, Config{})
	for tid := range uint64(m) {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: 1 + tid%300}))
	}
	for range 2 { // the first walk notes the receiver, the second keeps its sorted tids
		page, _, _, _ := walkPage(t, w, 1, 0, n, m, nil)
		require.Len(t, page, n)
	}
	require.True(t, w.page.built)
	for tid := range uint64(9000) { // (enough that the array of 1's tids is kept for 2's)
		require.NoError(t, w.Add(Key{2, 1 << 20 * (tid + 1)}, Spec{After: 1 + tid%300}))
	}

	w.BeginPage(1, 0, n)
	calls := 0
	for {
		page, resume, done := w.StepPage(budget, nil)
		calls++
		if done {
			assert.LessOrEqual(t, w.ListWork(), n)
			// Tid 5 was cancelled after it was looked up (dropped now), 900
			// before (skipped: the look-ups went on to tid 1001).
			tids := tidsOf(page)
			require.Len(t, tids, n-1)
			assert.NotContains(t, tids, uint64(5))
			assert.NotContains(t, tids, uint64(900))
			assert.Equal(t, uint64(n), tids[len(tids)-1])
			assert.Equal(t, uint64(n+1), resume, "the page is one short: the next starts past its last")
			break
		}
		assert.LessOrEqual(t, w.ListWork(), budget)
		switch calls {
		case 1:
			require.NoError(t, w.Cancel(Key{1, 5}))
			require.NoError(t, w.Cancel(Key{1, 900}))
		case 2: // another receiver paged meanwhile (a bulk op's ListPage) keeps its own sorted tids
			for range 2 {
				require.Len(t, w.ListPage(2, 0, 10, nil), 10)
			}
			require.True(t, w.page.built)
			require.Equal(t, uint64(2), w.page.r)
		}
	}
	assert.GreaterOrEqual(t, calls, n/budget, "the look-ups are spread over calls")
}

// wantPage is ListPage(r, from, n) from the receiver's full list, which
// leaves the wheel's kept tids alone.
func wantPage(w *Wheel, r, from uint64, n int) []uint64 {
	var tids []uint64
	for _, in := range w.List(r, nil) {
		if in.Tid >= from {
			tids = append(tids, in.Tid)
		}
	}
	slices.Sort(tids)
	return tids[:min(n, len(tids))]
}

// TestStepPageChangesBetweenSteps: adds, cancels, fires and replaces of
// the receiver's timers (and others') between a walk's steps, random, over
// many seeds. The page holds only live timers of the receiver, ascending,
// at or past from, at most n; every timer present from the walk's start to
// its end with a tid in [from, hi] is in it, where hi is the page's last
// tid when it is full, resume-1 when resume is set, and 2^64-1 otherwise;
// resume is past the page's last tid.
func TestStepPageChangesBetweenSteps(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	served := 0 // pages looked up from the sorted tids
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := newWheel(t, 0, Config{})
		if seed%3 == 0 {
			w.pageMin, w.buildMax = 8, 1<<20 // the walks that build sorted tids
		}
		noAdds := seed%6 == 0 // (no add to r between steps: the later rounds' pages are looked up from the sorted tids)
		const r = 5
		m := 1 + rng.IntN(400)
		tidOf := func() uint64 { return uint64(rng.IntN(2 * m)) }
		for range m {
			_ = w.Add(Key{r, tidOf()}, Spec{After: 1 + uint64(rng.IntN(50)), Every: uint64(rng.IntN(2) * 7)})
			_ = w.Add(Key{r + 1, tidOf()}, Spec{After: 1 + uint64(rng.IntN(50))})
		}
		for round := range 4 {
			n := 1 + rng.IntN(m/2+2)
			from := uint64(0)
			if round%2 == 1 {
				from = tidOf()
			}
			start := liveSet(w, r)
			gone := map[uint64]bool{}
			between := func(int) {
				for range rng.IntN(6) {
					k := Key{Receiver: r, Tid: tidOf()}
					switch rng.IntN(5) {
					case 0, 1:
						if w.Cancel(k) == nil {
							gone[k.Tid] = true
						}
					case 2:
						if noAdds {
							continue
						}
						_ = w.Add(k, Spec{After: 1 + uint64(rng.IntN(5)), Replace: rng.IntN(2) == 0})
						gone[k.Tid] = true // (replaced: a new timer)
					case 3:
						w.Advance(w.Now()+1, math.MaxInt, func(f *Fire) {
							if f.Receiver == r && f.Last {
								gone[f.Tid] = true
							}
						})
					default:
						_ = w.Cancel(Key{r + 1, tidOf()})
					}
				}
			}
			if l, ok := w.recv.get(r); ok && w.page.valid(w, r, l) {
				served++
			}
			page, resume, _, _ := walkPage(t, w, r, from, n, 1+rng.IntN(8), between)
			tids := tidsOf(page)
			require.LessOrEqual(t, len(tids), n, "seed %d", seed)
			require.True(t, slices.IsSorted(tids) && len(slices.Compact(slices.Clone(tids))) == len(tids), "seed %d: ascending, distinct: %v", seed, tids)
			end := liveSet(w, r)
			for _, in := range page {
				require.GreaterOrEqual(t, in.Tid, from, "seed %d", seed)
				require.True(t, end[in.Tid], "seed %d: tid %d in the page is not live", seed, in.Tid)
				require.Equal(t, uint64(r), in.Receiver)
			}
			hi := uint64(math.MaxUint64)
			switch {
			case len(tids) == n:
				hi = tids[n-1]
				require.Zero(t, resume, "seed %d: a full page", seed)
			case resume != 0:
				hi = resume - 1
				if len(tids) > 0 {
					require.Greater(t, resume, tids[len(tids)-1], "seed %d", seed)
				}
			}
			for tid := range start {
				if !gone[tid] && end[tid] && tid >= from && tid <= hi {
					require.Contains(t, tids, tid, "seed %d round %d: tid %d lived throughout (from %d, n %d, hi %d)", seed, round, tid, from, n, hi)
				}
			}
		}
	}
	assert.Greater(t, served, seeds/10, "pages served from the sorted tids")
}

// liveSet returns the tids of receiver r's timers.
func liveSet(w *Wheel, r uint64) map[uint64]bool {
	s := map[uint64]bool{}
	for _, in := range w.List(r, nil) {
		s[in.Tid] = true
	}
	return s
}

// TestEndPageStopsTheWalk: after EndPage (or a new BeginPage), removals no
// longer touch the old walk and StepPage has nothing to do.
func TestEndPageStopsTheWalk(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for tid := range uint64(50) {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: 5}))
	}
	w.BeginPage(1, 0, 10)
	_, _, done := w.StepPage(5, nil)
	require.False(t, done)
	w.EndPage()
	require.NoError(t, w.Cancel(Key{1, 3}))
	page, resume, done := w.StepPage(5, nil)
	assert.True(t, done)
	assert.Empty(t, page)
	assert.Zero(t, resume)
	page, _, _, _ = walkPage(t, w, 1, 0, 3, 7, nil)
	assert.Equal(t, []uint64{0, 1, 2}, tidsOf(page))
}
