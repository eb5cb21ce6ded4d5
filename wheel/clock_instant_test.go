package wheel

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Instant places tw-time inside the current tick: tick×Tick()+sub is the
// virtual time elapsed since tick 0, at speed 1, at other speeds, across
// a freeze, and at the saturation bound.
func TestClockInstant(t *testing.T) {
	c, src := newTestClock(100, clockTestTick)
	tick, sub := c.Instant()
	require.Equal(t, [2]uint64{100, 0}, [2]uint64{tick, sub})
	src.now += 25*time.Millisecond + 7
	tick, sub = c.Instant()
	require.Equal(t, [2]uint64{102, uint64(5*time.Millisecond + 7)}, [2]uint64{tick, sub})
	require.Equal(t, tick, c.Now(), "Instant's tick is Now's")

	require.NoError(t, c.SetSpeed(2))
	src.now += 3 * time.Millisecond // 6ms of virtual time
	tick, sub = c.Instant()
	require.Equal(t, [2]uint64{103, uint64(1*time.Millisecond + 7)}, [2]uint64{tick, sub})

	c.Freeze()
	src.now += time.Hour
	tick, sub = c.Instant()
	require.Equal(t, [2]uint64{103, uint64(1*time.Millisecond + 7)}, [2]uint64{tick, sub}, "frozen: the kept partial tick")
	require.NoError(t, c.FastForward(5))
	tick, sub = c.Instant()
	require.Equal(t, [2]uint64{108, uint64(1*time.Millisecond + 7)}, [2]uint64{tick, sub}, "a fast-forward keeps the partial tick")
}

// At random speeds and steps, Instant's virtual time never decreases and
// never runs ahead of the virtual time that really passed, and Until of
// the next boundary ends exactly there.
func TestClockInstantMonotonic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c, src := newTestClock(0, clockTestTick)
	var last uint64
	for range 10_000 {
		if rng.IntN(50) == 0 {
			require.NoError(t, c.SetSpeed([]float64{1, 2, 0.5, 60, 0.001}[rng.IntN(5)]))
		}
		src.now += time.Duration(rng.Int64N(int64(3 * clockTestTick)))
		tick, sub := c.Instant()
		require.Less(t, sub, uint64(clockTestTick))
		v := tick*uint64(clockTestTick) + sub
		require.GreaterOrEqual(t, v, last)
		last = v
		d, ok := c.Until(tick + 1)
		require.True(t, ok)
		src.now += d
		require.Equal(t, tick+1, c.Now())
		n, s := c.Instant()
		require.Equal(t, tick+1, n)
		last = max(last, n*uint64(clockTestTick)+s)
	}
}

// A clock made frozen is at its start tick's boundary, and Resume starts
// that tick afresh.
func TestNewFrozenClock(t *testing.T) {
	src := &fakeClockSource{now: time.Second}
	c := NewFrozenClock(50, clockTestTick, src.read)
	require.True(t, c.Frozen())
	src.now += time.Hour
	tick, sub := c.Instant()
	require.Equal(t, [2]uint64{50, 0}, [2]uint64{tick, sub})
	c.Resume()
	src.now += clockTestTick - 1
	require.Equal(t, uint64(50), c.Now())
	src.now++
	require.Equal(t, uint64(51), c.Now())
}
