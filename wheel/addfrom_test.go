package wheel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAddFromAhead: while the wheel trails the caller's tw-time, After and
// At count from the caller's now, Every defaults to the first delay from
// now, and the timer fires at the returned due tick once the wheel catches up.
func TestAddFromAhead(t *testing.T) {
	w := newWheel(t, 100, Config{})
	const now = 150 // the caller's tw-time; the wheel is still at 100

	due, err := w.AddFrom(Key{1, 1}, Spec{After: 10, Repeat: 3}, now)
	require.NoError(t, err)
	assert.Equal(t, uint64(160), due)
	in, err := w.Get(Key{1, 1})
	require.NoError(t, err)
	assert.Equal(t, uint64(160), in.Due)
	assert.Equal(t, uint64(60), in.Remaining, "Remaining counts from the wheel's Now")
	assert.Equal(t, uint64(10), in.Every, "Every defaults to due - now, not due - Now()")

	due, err = w.AddFrom(Key{1, 2}, Spec{At: 170}, now)
	require.NoError(t, err)
	assert.Equal(t, uint64(170), due)
	in, _ = w.Get(Key{1, 2})
	assert.Equal(t, uint64(20), in.Every)

	due, err = w.AddFrom(Key{1, 3}, Spec{After: 5, Every: 7, Repeat: 2}, now)
	require.NoError(t, err)
	assert.Equal(t, uint64(155), due)

	// Catch up in bounded turns: nothing fires before the due ticks.
	var ticks []uint64
	var tids []uint64
	for done := false; !done; {
		_, done = w.Advance(now+30, 1, func(f *Fire) {
			ticks = append(ticks, f.Tick)
			tids = append(tids, f.Tid)
		})
	}
	assert.Equal(t, []uint64{155, 160, 162, 170, 170, 180}, ticks)
	assert.Equal(t, []uint64{3, 1, 3, 1, 2, 1}, tids, "same-tick order is add order")
}

// TestAddFromErrors: errors are judged against max(now, Now()), and an
// error leaves the wheel unchanged with due 0.
func TestAddFromErrors(t *testing.T) {
	w := newWheel(t, 100, Config{})
	const now = 150
	for _, c := range []struct {
		name string
		s    Spec
		want error
	}{
		{"at between Now and now", Spec{At: 120}, ErrPast},
		{"at now", Spec{At: now}, ErrPast},
		{"at before Now", Spec{At: 50}, ErrPast},
		{"zero", Spec{}, ErrZeroAfter},
		{"after overflows from now", Spec{After: math.MaxUint64 - now + 1}, ErrOverflow},
		{"after overflows from now only", Spec{After: math.MaxUint64 - 120}, ErrOverflow},
	} {
		due, err := w.AddFrom(Key{1, 1}, c.s, now)
		assert.ErrorIs(t, err, c.want, c.name)
		assert.Zero(t, due, c.name)
		assert.Zero(t, w.Len(), c.name)
	}
	due, err := w.AddFrom(Key{1, 1}, Spec{After: math.MaxUint64 - now}, now)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64), due)
	due, err = w.AddFrom(Key{1, 1}, Spec{After: 1}, now)
	assert.ErrorIs(t, err, ErrExists)
	assert.Zero(t, due)
	in, _ := w.Get(Key{1, 1})
	assert.Equal(t, uint64(math.MaxUint64), in.Due, "unchanged by the failed add")
	due, err = w.AddFrom(Key{1, 1}, Spec{At: now + 1, Replace: true}, now)
	require.NoError(t, err)
	assert.Equal(t, uint64(now+1), due)
}

// TestAddFromBehind: a now before Now() is treated as Now().
func TestAddFromBehind(t *testing.T) {
	w := newWheel(t, 100, Config{})
	due, err := w.AddFrom(Key{1, 1}, Spec{After: 5}, 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(105), due)
	_, err = w.AddFrom(Key{1, 2}, Spec{At: 100}, 10)
	assert.ErrorIs(t, err, ErrPast)
	in, _ := w.Get(Key{1, 1})
	assert.Equal(t, uint64(5), in.Every)
}

// TestAddIsAddFromNow: Add(k, s) and AddFrom(k, s, Now()) do the same on
// random specs, and AddFrom's due is the Due that Get reports.
func TestAddIsAddFromNow(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, start := range []uint64{0, 1000, math.MaxUint64 - 50} {
		a, b := newWheel(t, start, Config{Levels: 3, Slots: 4}), newWheel(t, start, Config{Levels: 3, Slots: 4})
		for i := range 3000 {
			k := Key{rng.Uint64N(3), rng.Uint64N(20)}
			var s Spec
			switch rng.IntN(3) {
			case 0:
				s.At = a.Now() - 2 + rng.Uint64N(40)
			case 1:
				s.After = rng.Uint64N(40)
			default:
				s.After = math.MaxUint64 - a.Now() - 2 + rng.Uint64N(4)
			}
			s.Every, s.Replace = rng.Uint64N(3), rng.IntN(2) == 0
			errA := a.Add(k, s)
			due, errB := b.AddFrom(k, s, b.Now())
			require.Equal(t, errA, errB, "op %d", i)
			inA, _ := a.Get(k)
			inB, _ := b.Get(k)
			require.Equal(t, inA, inB, "op %d", i)
			if errB == nil {
				require.Equal(t, inB.Due, due, "op %d", i)
			}
			if i%10 == 0 {
				to := a.Now() + rng.Uint64N(30)
				fa, fb := collect(a, to), collect(b, to)
				require.Equal(t, fa, fb, "op %d", i)
			}
		}
	}
}
