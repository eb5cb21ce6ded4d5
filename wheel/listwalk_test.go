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
// its resume tid, and the most timers one step visited.
func walkPage(t *testing.T, w *Wheel, r, from uint64, n, budget int, between func(int)) ([]Info, uint64, int) {
	t.Helper()
	w.BeginPage(r, from, n)
	worst := 0
	for step := 0; ; step++ {
		require.Less(t, step, 1_000_000, "the walk does not end")
		page, resume, done := w.StepPage(budget, nil)
		worst = max(worst, w.ListWork())
		if done {
			return page, resume, worst
		}
		if between != nil {
			between(step)
		}
	}
}

// TestStepPageBoundsEachCall: the first page of a 100k-timer receiver
// walked 256 timers at a time visits at most 256 per call, and gives what
// ListPage gives; so do the pages after it, which come from the sorted tids
// the walk kept (each about the page's size). A single ListPage visits all
// 100k in one call, which is what a loop turn did before.
func TestStepPageBoundsEachCall(t *testing.T) {
	const m, n, budget = 100_000, 1001, 256
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
		want := tidsOf(w.ListPage(1, from, n, nil))
		w.ListPage(2, 0, 1, nil) // (so that the walk, not ListPage's memory, is what is tested)
		page, resume, worst := walkPage(t, w, 1, from, n, budget, nil)
		require.Equal(t, want, tidsOf(page), "page from %d", from)
		assert.Zero(t, resume)
		assert.LessOrEqual(t, worst, budget+n+20, "page %d: one call visits at most the budget, and the last makes the page", pages)
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
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := newWheel(t, 0, Config{})
		if seed%3 == 0 {
			w.pageMin, w.buildMax = 8, 1<<20 // the walks that build sorted tids
		}
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
			page, resume, _ := walkPage(t, w, r, from, n, 1+rng.IntN(8), between)
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
	page, _, _ = walkPage(t, w, 1, 0, 3, 7, nil)
	assert.Equal(t, []uint64{0, 1, 2}, tidsOf(page))
}
