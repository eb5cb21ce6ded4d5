package wheel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A timer moved from its callback fires at the ticks the caller chooses,
// keeping its counts; moved from outside, its next firing moves.
func TestRescheduleFromCallback(t *testing.T) {
	w, err := New(100, Config{Levels: 3, Slots: 4}) // small: moves cross levels and the overflow list
	require.NoError(t, err)
	k := Key{1, 1}
	require.NoError(t, w.Add(k, Spec{After: 5, Repeat: 4}))
	require.NoError(t, w.Add(Key{1, 2}, Spec{After: 7, Every: 7})) // a neighbour keeps its own ticks
	gaps := []uint64{3, 90, 1}
	var got []Fire
	w.Advance(1000, 0, func(f *Fire) {
		got = append(got, Fire{Key: f.Key, Tick: f.Tick, Fired: f.Fired, Last: f.Last})
		if f.Key == k && !f.Last {
			require.NoError(t, w.Reschedule(k, f.Tick+gaps[f.Fired-1]))
		}
	})
	var mine []uint64
	for _, f := range got {
		if f.Key == k {
			mine = append(mine, f.Tick)
		}
	}
	assert.Equal(t, []uint64{105, 108, 198, 199}, mine)
	in, err := w.Get(Key{1, 2})
	require.NoError(t, err)
	assert.Equal(t, uint64(1003), in.Due) // still on its own grid: 100 + 7k
}

// The errors, and a move to Now().
func TestRescheduleErrorsAndNow(t *testing.T) {
	w, _ := New(10, Config{})
	k := Key{2, 3}
	assert.ErrorIs(t, w.Reschedule(k, 20), ErrNotFound)
	require.NoError(t, w.Add(k, Spec{After: 50}))
	require.NoError(t, w.Add(Key{2, 1}, Spec{After: 1}))
	assert.ErrorIs(t, w.Reschedule(k, 9), ErrPast)
	require.NoError(t, w.Pause(k))
	assert.ErrorIs(t, w.Reschedule(k, 30), ErrPaused)
	require.NoError(t, w.Resume(k))
	require.NoError(t, w.Reschedule(k, 10)) // due now: the next Advance fires it first
	var ticks []uint64
	w.Advance(11, 0, func(f *Fire) { ticks = append(ticks, f.Tick) })
	assert.Equal(t, []uint64{10, 11}, ticks)
}

// Against a sorted-list model: random moves of random timers keep every
// firing at the tick the model says, in add order on the same tick.
func TestRescheduleModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		w, _ := New(0, Config{Levels: 3, Slots: 4})
		due := map[Key]uint64{}
		var keys []Key
		for i := range 40 {
			k := Key{1, uint64(i)}
			after := 1 + rng.Uint64N(200)
			require.NoError(t, w.Add(k, Spec{After: after, Repeat: 1}))
			due[k] = after
			keys = append(keys, k)
		}
		for range 30 {
			k := keys[rng.IntN(len(keys))]
			d := w.Now() + rng.Uint64N(300)
			require.NoError(t, w.Reschedule(k, d))
			due[k] = d
			w.Advance(w.Now()+rng.Uint64N(20), 0, func(f *Fire) {
				require.Equal(t, due[f.Key], f.Tick, "round %d", round)
				delete(due, f.Key)
				for j, kk := range keys {
					if kk == f.Key {
						keys = append(keys[:j], keys[j+1:]...)
						break
					}
				}
			})
			if len(keys) == 0 {
				break
			}
		}
	}
}

// From its callback, the firing timer is moved without a look-up of its
// key (Wheel.firing); a callback that cancels it first, or cancels it and
// adds it again (a new timer, maybe in the same node), moves what the key
// names then: nothing (ErrNotFound), or the new timer. A neighbour's key
// is looked up as usual.
func TestRescheduleFiringCancelled(t *testing.T) {
	w, err := New(100, Config{})
	require.NoError(t, err)
	a, b, c := Key{1, 1}, Key{1, 2}, Key{2, 1}
	require.NoError(t, w.Add(a, Spec{After: 1, Every: 1}))
	require.NoError(t, w.Add(b, Spec{After: 1, Every: 1}))
	require.NoError(t, w.Add(c, Spec{After: 50}))
	w.Advance(101, 0, func(f *Fire) {
		switch f.Key {
		case a:
			require.NoError(t, w.Cancel(a))
			assert.ErrorIs(t, w.Reschedule(a, 200), ErrNotFound)
			require.NoError(t, w.Reschedule(c, 300)) // a neighbour, from the callback
		case b:
			require.NoError(t, w.Cancel(b))
			require.NoError(t, w.Add(b, Spec{After: 10}))
			require.NoError(t, w.Reschedule(b, 400))
		}
	})
	_, err = w.Get(a)
	assert.ErrorIs(t, err, ErrNotFound)
	in, err := w.Get(b)
	require.NoError(t, err)
	assert.Equal(t, uint64(400), in.Due)
	assert.Equal(t, uint64(0), in.Fired, "the new timer, not the cancelled one")
	in, err = w.Get(c)
	require.NoError(t, err)
	assert.Equal(t, uint64(300), in.Due)
	require.Equal(t, 2, w.Len())
}
