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

// A receiver's timer due on the tick after another receiver's 100,000
// fires in the first bounded Advance that reaches its tick, not after all
// of them (issue 24 item 12: with firings in due-tick order it was the
// 100,001st, 100 Advances of 1,000 later, each a loop turn of a server
// whose clock moves a tick per turn). Every timer still fires once, never
// before its tick, each reporting the tick it was due at; receiver 1's in
// add order; and Now() never passes the Advance's `to`.
func TestFairNextTick(t *testing.T) {
	const n, perCall = 100_000, 1000
	w := newWheel(t, 0, Config{})
	for i := range n {
		require.NoError(t, w.Add(Key{Receiver: 1, Tid: uint64(i)}, Spec{After: 60, Repeat: 1}))
	}
	require.NoError(t, w.Add(Key{Receiver: 2, Tid: 1}, Spec{After: 61, Repeat: 1}))

	calls, bCall, next := 0, 0, uint64(0)
	for to, done := uint64(60), false; !done; to++ {
		calls++
		_, done = w.Advance(to, perCall, func(f *Fire) {
			require.LessOrEqual(t, f.Tick, to, "fired before its tick")
			require.LessOrEqual(t, f.Tick, w.Now())
			if f.Receiver == 2 {
				require.Zero(t, bCall, "receiver 2's timer fired twice")
				bCall = calls
				assert.Equal(t, uint64(61), f.Tick)
				return
			}
			require.Equal(t, next, f.Tid, "receiver 1's timers in add order")
			next++
			require.Equal(t, uint64(60), f.Tick)
		})
		require.LessOrEqual(t, w.Now(), to)
	}
	assert.Equal(t, 2, bCall, "receiver 2's timer fired in this Advance (the first to reach tick 61)")
	assert.Equal(t, uint64(n), next)
	assert.Equal(t, n/perCall+1, calls)
	assert.Equal(t, 0, w.Len())
}

// While a backlog drains, each later tick's timers join the rotation: a
// receiver that gets a timer on every tick (receiver 2) fires each within
// the Advance that reaches its tick, one per receiver per round, while the
// backlog's receiver (1) goes on in its own order. A repeating timer of the
// backlog whose next firing falls due before the backlog is done (every 3
// ticks, 20 Advances of backlog) fires again from its receiver's queue, in
// due order, each firing once: receiver 3's two timers alternate by tick.
func TestFairBacklogJoins(t *testing.T) {
	const n, perCall = 20_000, 1000
	w := newWheel(t, 0, Config{})
	for i := range n {
		require.NoError(t, w.Add(Key{Receiver: 1, Tid: uint64(i)}, Spec{After: 10, Repeat: 1}))
	}
	require.NoError(t, w.Add(Key{Receiver: 3, Tid: 1}, Spec{After: 10, Every: 3, Repeat: 10}))
	require.NoError(t, w.Add(Key{Receiver: 3, Tid: 2}, Spec{After: 11, Every: 3, Repeat: 10}))
	for k := range uint64(40) {
		require.NoError(t, w.Add(Key{Receiver: 2, Tid: k}, Spec{At: 11 + k, Repeat: 1}))
	}
	last := map[uint64]uint64{} // each receiver's last firing's tick
	var got3 []Key
	fired := 0
	for to := uint64(10); w.Len() > 0; to++ {
		w.Advance(to, perCall, func(f *Fire) {
			fired++
			require.LessOrEqual(t, f.Tick, to)
			require.GreaterOrEqual(t, f.Tick, last[f.Receiver], "receiver %d's firings in due order", f.Receiver)
			last[f.Receiver] = f.Tick
			switch f.Receiver {
			case 2:
				assert.Equal(t, to, f.Tick, "receiver 2's timer of tick %d fired in the Advance to %d", f.Tick, to)
			case 3:
				got3 = append(got3, f.Key)
			}
		})
	}
	assert.Equal(t, n+20+40, fired)
	require.Len(t, got3, 20)
	for i, k := range got3 {
		assert.Equal(t, uint64(1+i%2), k.Tid, "receiver 3's firing %d", i)
	}
	assert.Equal(t, 0, w.Len())
}

// A snapshot taken while a backlog drains in rotation (the wheel ahead of
// the timers still due) restores a wheel that fires the rest in the same
// order, with the same ticks, and freezes to the same bytes.
func TestFairSnapshotMidBacklog(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for i := range 5000 {
		require.NoError(t, w.Add(Key{Receiver: uint64(1 + i%3), Tid: uint64(i)}, Spec{After: 10, Every: uint64(1 + i%7), Repeat: 3}))
	}
	for k := range uint64(30) {
		require.NoError(t, w.Add(Key{Receiver: 9, Tid: k}, Spec{At: 11 + k/2, Repeat: 1}))
	}
	w.Advance(10, 1000, nil)
	w.Advance(11, 1000, nil)
	w.Advance(12, 1000, nil) // two ticks joined a backlog
	require.True(t, w.rot.on)
	require.Less(t, w.Now(), uint64(20))
	snap := snapshotOf(t, w, 0)
	r := restoreOf(t, Config{Levels: 3, Slots: 3}, snap, nil)
	assert.Equal(t, snap, snapshotOf(t, r, 0))
	log := func(w *Wheel) (fs []Fire) {
		for to, done := w.Now(), false; !done; to++ {
			_, done = w.Advance(to, 700, func(f *Fire) { fs = append(fs, *f) })
		}
		return fs
	}
	a, b := log(w), log(r)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b)
}

// A backlog fired in rotation from a wheel whose index is big enough to be
// prefetched (rotPrefetch) fires as the same wheel does without the timers
// that made it big: the prefetch is only a hint, also while the callbacks
// cancel due timers of other receivers (emptying groups ahead in the ring
// and changing their queues) and add timers that join the rotation.
func TestRotationPrefetchIsOnlyAHint(t *testing.T) {
	sameWithABigIndex(t, 60_000, func(w *Wheel, fire func(*Fire)) {
		for i := range 60_000 {
			require.NoError(t, w.Add(Key{Receiver: uint64(i % 700), Tid: uint64(i)}, Spec{After: 1 + uint64(i%30), Repeat: uint32(1 + i%3), Every: 7}))
		}
		rotated := false
		for to, n := uint64(30), w.Len()-60_000; w.Len() > n && to < 10_000; to++ {
			w.Advance(to, 2_000, fire)
			rotated = rotated || w.rot.on
		}
		require.True(t, rotated, "the backlog fired in the rotation")
	}, func(w *Wheel, f *Fire, k int) {
		switch k % 97 {
		case 0: // the add 20 after this one's: a timer of a receiver 20 on, if not fired yet
			_ = w.Cancel(Key{Receiver: (f.Receiver + 20) % 700, Tid: f.Tid + 20})
		case 1:
			require.NoError(t, w.Add(Key{Receiver: f.Receiver, Tid: 1_000_000 + uint64(k)}, Spec{After: 1, Repeat: 1}))
		}
	})
}

// Ticks of a few timers each fired from a wheel whose index is big enough
// to be prefetched (prefetchSlots) fire as the same wheel does without the
// timers that made it big, also while the callbacks cancel timers of the
// slots ahead (the ones prefetched) and add timers that fall into them.
func TestSlotPrefetchIsOnlyAHint(t *testing.T) {
	sameWithABigIndex(t, 20_000, func(w *Wheel, fire func(*Fire)) {
		for i := range 20_000 {
			require.NoError(t, w.Add(Key{Receiver: uint64(i % 300), Tid: uint64(i)}, Spec{After: 1 + uint64(i/3), Repeat: uint32(1 + i%2), Every: 5}))
		}
		for to, n := uint64(0), w.Len()-20_000; w.Len() > n && to < 100_000; to += 50 {
			w.Advance(to, 0, fire)
		}
	}, func(w *Wheel, f *Fire, k int) {
		switch k % 7 {
		case 0: // the first timer of the tick slotsAhead/2 on
			_ = w.Cancel(Key{Receiver: (f.Tid + 3*slotsAhead/2) % 300, Tid: f.Tid + 3*slotsAhead/2})
		case 1: // one more into the slot slotsAhead on
			require.NoError(t, w.Add(Key{Receiver: f.Receiver, Tid: 1_000_000 + uint64(k)}, Spec{After: slotsAhead, Repeat: 1}))
		}
	})
}

// sameWithABigIndex runs a scenario twice, on a new wheel and on one that
// first gets 200,000 timers of other receivers due far later (an index
// past prefetchMin, so that the firings prefetch), and requires the same
// firings, more than least (and at most 10 times as many): run adds its
// timers and fires them through fire, which calls each with the firing
// and how many fired so far.
func sameWithABigIndex(t *testing.T, least int, run func(w *Wheel, fire func(*Fire)), each func(w *Wheel, f *Fire, k int)) {
	firings := func(filler int) []Fire {
		w := newWheel(t, 0, Config{})
		for i := range filler {
			require.NoError(t, w.Add(Key{Receiver: 1_000_000 + uint64(i%1000), Tid: uint64(i)}, Spec{After: 1_000_000}))
		}
		require.Equal(t, filler > 0, w.index.table.len() >= prefetchMin)
		var got []Fire
		run(w, func(f *Fire) {
			got = append(got, *f)
			require.LessOrEqual(t, len(got), 10*least, "firings that do not end")
			each(w, f, len(got))
		})
		return got
	}
	small, big := firings(0), firings(200_000)
	require.Greater(t, len(small), least)
	for i := range min(len(small), len(big)) { // the first difference (a diff of the whole is slow)
		require.Equal(t, small[i], big[i], "firing %d", i)
	}
	require.Len(t, big, len(small))
}
