package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A receiver's one timer, added after 100,000 of another receiver's due on
// the same tick, fires in the first round of that tick: second, in the
// first bounded Advance, not after all of them (in add order it was the
// 100,001st, 100 Advances of 1,000 later). Every timer still fires once, on
// its tick.
func TestFairBigTick(t *testing.T) {
	const n = 100_000
	w := newWheel(t, 0, Config{})
	for i := range n {
		require.NoError(t, w.Add(Key{Receiver: 1, Tid: uint64(i)}, Spec{After: 60, Repeat: 1}))
	}
	require.NoError(t, w.Add(Key{Receiver: 2, Tid: 1}, Spec{After: 60, Repeat: 1}))

	calls, pos, fired := 0, 0, 0
	seen := make([]bool, n)
	for done := false; !done; {
		calls++
		_, done = w.Advance(60, 1000, func(f *Fire) {
			fired++
			require.Equal(t, uint64(60), f.Tick)
			if f.Receiver == 2 {
				pos = fired
				return
			}
			require.False(t, seen[f.Tid], "tid %d fired twice", f.Tid)
			seen[f.Tid] = true
		})
		if pos == 0 {
			require.Less(t, calls, 2, "receiver 2's timer did not fire in the first Advance")
		}
	}
	assert.Equal(t, 2, pos, "receiver 2's timer fired at this place in the tick")
	assert.Equal(t, n+1, fired)
	assert.Equal(t, 0, w.Len())
}

// The same-tick order is rounds by receiver, each round in add order, and
// each receiver's own timers in add order; a tick where no receiver has
// two timers fires in add order.
func TestFairRounds(t *testing.T) {
	w := newWheel(t, 0, Config{})
	// Add order: a1 a2 a3 b1 c1 b2; a4 is due on another tick.
	for _, k := range []Key{{1, 1}, {1, 2}, {1, 3}, {2, 1}, {3, 1}, {2, 2}} {
		require.NoError(t, w.Add(k, Spec{After: 5}))
	}
	require.NoError(t, w.Add(Key{1, 4}, Spec{After: 6}))
	for _, k := range []Key{{9, 1}, {8, 1}, {7, 1}} {
		require.NoError(t, w.Add(k, Spec{After: 6}))
	}
	var got []Key
	for _, f := range collect(w, 6) {
		got = append(got, f.Key)
	}
	assert.Equal(t, []Key{
		{1, 1}, {2, 1}, {3, 1}, // round 0
		{1, 2}, {2, 2}, // round 1
		{1, 3},                         // round 2
		{1, 4}, {9, 1}, {8, 1}, {7, 1}, // tick 6: one each, add order
	}, got)
}

// A timer that becomes due at Now() after the tick's order was made (Resume
// with no ticks left, Reschedule to Now()) fires after the timers already
// waiting on the tick, whatever its add order.
func TestFairJoinsAtEnd(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for _, k := range []Key{{1, 1}, {2, 1}, {3, 1}, {4, 1}} {
		require.NoError(t, w.Add(k, Spec{After: 5}))
	}
	require.NoError(t, w.Add(Key{5, 1}, Spec{After: 9}))
	n, done := w.Advance(5, 1, nil) // {1 1} fired; the tick's order is made
	require.Equal(t, 1, n)
	require.False(t, done)
	require.NoError(t, w.Pause(Key{2, 1})) // due now: 0 ticks left
	require.NoError(t, w.Resume(Key{2, 1}))
	require.NoError(t, w.Reschedule(Key{5, 1}, 5))
	var got []Key
	for _, f := range collect(w, 5) {
		got = append(got, f.Key)
	}
	assert.Equal(t, []Key{{3, 1}, {4, 1}, {2, 1}, {5, 1}}, got)
}

// sortBySeq sorts input of any number of ascending runs (merged up to
// maxMergeRuns, radix-sorted beyond), of any length.
func TestSortBySeqRuns(t *testing.T) {
	w := newWheel(t, 0, Config{})
	rng := rand.New(rand.NewPCG(24, 12))
	for range 2000 {
		n := 1 + rng.IntN(600)
		runs := 1 + rng.IntN(7)
		a := make([]uint64, n)
		for i := range a {
			a[i] = uint64(rng.IntN(1<<20))<<32 | uint64(i)
		}
		// Sort runs pieces of a each, making that many ascending runs (or fewer).
		for r := range runs {
			slices.Sort(a[r*n/runs : (r+1)*n/runs])
		}
		want := slices.Sorted(slices.Values(a))
		require.Equal(t, want, w.sortBySeq(slices.Clone(a)), "%d entries in %d runs", n, runs)
	}
}
