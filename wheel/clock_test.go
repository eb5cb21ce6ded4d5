package wheel

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClockSource is a Source the test advances by hand.
type fakeClockSource struct {
	now   time.Duration
	calls int
}

func (f *fakeClockSource) read() time.Duration {
	f.calls++
	return f.now
}

const clockTestTick = 10 * time.Millisecond

func newTestClock(start uint64, tick time.Duration) (*Clock, *fakeClockSource) {
	src := &fakeClockSource{now: 7 * time.Second} // arbitrary origin
	return NewClock(start, tick, src.read), src
}

func TestClockNew(t *testing.T) {
	for _, origin := range []time.Duration{0, -5 * time.Hour, 7 * time.Second, math.MaxInt64} {
		src := &fakeClockSource{now: origin}
		c := NewClock(42, clockTestTick, src.read)
		assert.Equal(t, 1, src.calls, "NewClock reads the source once")
		assert.Equal(t, uint64(42), c.Now())
		assert.Equal(t, clockTestTick, c.Tick())
		assert.False(t, c.Frozen())
		assert.Equal(t, 1.0, c.Speed())
	}
}

func TestClockNewPanics(t *testing.T) {
	src := &fakeClockSource{}
	assert.PanicsWithValue(t, "wheel: NewClock with non-positive tick", func() { NewClock(0, 0, src.read) })
	assert.PanicsWithValue(t, "wheel: NewClock with non-positive tick", func() { NewClock(0, -time.Second, src.read) })
	assert.PanicsWithValue(t, "wheel: NewClock with nil Source", func() { NewClock(0, time.Second, nil) })
}

func TestClockRealTime(t *testing.T) {
	tests := []struct {
		elapsed time.Duration
		want    uint64
	}{
		{0, 100},
		{time.Nanosecond, 100},
		{clockTestTick - 1, 100},
		{clockTestTick, 101},
		{clockTestTick + 1, 101},
		{25 * time.Millisecond, 102},
		{time.Second, 200},
		{time.Hour, 100 + 360_000},
		{math.MaxInt64 - 7*time.Second, 100 + uint64(math.MaxInt64-7*time.Second)/uint64(clockTestTick)},
	}
	for _, tt := range tests {
		c, src := newTestClock(100, clockTestTick)
		src.now += tt.elapsed
		assert.Equal(t, tt.want, c.Now(), "elapsed %v", tt.elapsed)
	}
}

// Odd step sizes that do not divide the tick, so remainders must carry.
var clockOddSteps = []time.Duration{1, 3_333_333, 9_999_999, 17, 12_345_678, 499}

func TestClockNoDrift(t *testing.T) {
	const steps = 1_000_000
	c, src := newTestClock(5, clockTestTick)
	var sum uint64
	for i := range steps {
		d := clockOddSteps[i%len(clockOddSteps)]
		src.now += d
		sum += uint64(d)
		if got, want := c.Now(), 5+sum/uint64(clockTestTick); got != want {
			require.Equal(t, want, got, "step %d", i)
		}
	}
	assert.Equal(t, 5+sum/uint64(clockTestTick), c.Now())
	assert.Equal(t, uint64(5+427_991), c.Now(), "166666 cycles of 25679527ns plus 13333350ns")
}

// At speed 1 every rebase is exact, so rebasing on every step does not drift.
func TestClockNoDriftAcrossRebases(t *testing.T) {
	ops := map[string]func(c *Clock){
		"SetSpeed(1)":   func(c *Clock) { require.NoError(t, c.SetSpeed(1)) },
		"Freeze+Resume": func(c *Clock) { c.Freeze(); c.Resume() },
		"FastForward":   func(c *Clock) { require.NoError(t, c.FastForward(1)) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			const steps = 200_000
			c, src := newTestClock(0, clockTestTick)
			var sum, ff uint64
			for i := range steps {
				d := clockOddSteps[i%len(clockOddSteps)]
				src.now += d
				sum += uint64(d)
				op(c)
				if name == "FastForward" {
					ff++
				}
				if got, want := c.Now(), sum/uint64(clockTestTick)+ff; got != want {
					require.Equal(t, want, got, "step %d", i)
				}
			}
			assert.Equal(t, sum/uint64(clockTestTick)+ff, c.Now())
		})
	}
}

// Without a rebase, the target at a non-integer speed is exactly
// floor(elapsed × speed / tick) with speed taken as its exact float64 value.
func TestClockNoDriftAtSpeed(t *testing.T) {
	for _, speed := range []float64{60, 0.1, 1.0 / 3, 2.5, 0.001, 1e6} {
		c, src := newTestClock(0, clockTestTick)
		require.NoError(t, c.SetSpeed(speed))
		exact := new(big.Rat).SetFloat64(speed)
		var sum int64
		for i := range 300_000 {
			d := clockOddSteps[i%len(clockOddSteps)]
			src.now += d
			sum += int64(d)
			got := c.Now()
			if i%997 == 0 || i == 299_999 {
				v := new(big.Rat).Mul(new(big.Rat).SetInt64(sum), exact)
				v.Quo(v, new(big.Rat).SetInt64(int64(clockTestTick)))
				want := new(big.Int).Quo(v.Num(), v.Denom()) // floor: v >= 0
				require.Equal(t, want.Uint64(), got, "speed %v step %d", speed, i)
			}
		}
	}
}

func TestClockFreezeResume(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	src.now += 25 * time.Millisecond
	require.Equal(t, uint64(2), c.Now())

	c.Freeze()
	assert.True(t, c.Frozen())
	assert.Equal(t, uint64(2), c.Now())
	src.now += time.Hour
	assert.Equal(t, uint64(2), c.Now(), "frozen target does not move")
	c.Freeze() // idempotent
	assert.True(t, c.Frozen())
	assert.Equal(t, uint64(2), c.Now())

	c.Resume()
	assert.False(t, c.Frozen())
	assert.Equal(t, uint64(2), c.Now(), "no jump on resume")
	src.now += 5*time.Millisecond - 1
	assert.Equal(t, uint64(2), c.Now(), "the 5ms partial tick before Freeze is kept, not rounded up")
	src.now++
	assert.Equal(t, uint64(3), c.Now(), "5ms before Freeze + 5ms after Resume = 1 tick")
	c.Resume() // idempotent
	src.now += 10 * time.Millisecond
	assert.Equal(t, uint64(4), c.Now())
}

func TestClockFreezeResumeCallsSourceOnce(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	n := src.calls
	c.Freeze()
	c.Freeze()
	assert.Equal(t, n+1, src.calls)
	c.Resume()
	c.Resume()
	assert.Equal(t, n+2, src.calls)
	require.NoError(t, c.FastForward(0))
	assert.Equal(t, n+2, src.calls, "FastForward(0) is a no-op")
}

func TestClockFastForward(t *testing.T) {
	t.Run("synced", func(t *testing.T) {
		c, src := newTestClock(10, clockTestTick)
		src.now += 15 * time.Millisecond
		require.NoError(t, c.FastForward(100))
		assert.Equal(t, uint64(111), c.Now())
		assert.False(t, c.Frozen())
		src.now += 5 * time.Millisecond
		assert.Equal(t, uint64(112), c.Now(), "partial tick kept across FastForward")
		require.NoError(t, c.FastForward(0))
		assert.Equal(t, uint64(112), c.Now())
	})
	t.Run("frozen", func(t *testing.T) {
		c, src := newTestClock(10, clockTestTick)
		src.now += 15 * time.Millisecond
		c.Freeze()
		require.NoError(t, c.FastForward(7))
		assert.Equal(t, uint64(18), c.Now())
		assert.True(t, c.Frozen(), "FastForward does not resume")
		src.now += time.Hour
		assert.Equal(t, uint64(18), c.Now())
		c.Resume()
		assert.Equal(t, uint64(18), c.Now())
		src.now += 5 * time.Millisecond
		assert.Equal(t, uint64(19), c.Now())
	})
}

func TestClockSetSpeed(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	src.now += 25 * time.Millisecond // 2 ticks + 5ms
	require.NoError(t, c.SetSpeed(60))
	assert.Equal(t, 60.0, c.Speed())
	assert.Equal(t, uint64(2), c.Now(), "no jump at the change")

	src.now += 1 * time.Millisecond // 60ms virtual + 5ms carried = 6 ticks + 5ms
	assert.Equal(t, uint64(8), c.Now())
	src.now += time.Second // 60s virtual = 6000 ticks
	assert.Equal(t, uint64(6008), c.Now())

	require.NoError(t, c.SetSpeed(1))
	assert.Equal(t, uint64(6008), c.Now(), "no jump back")
	src.now += 5*time.Millisecond - 1
	assert.Equal(t, uint64(6008), c.Now())
	src.now++
	assert.Equal(t, uint64(6009), c.Now(), "5ms carried across both speed changes")
}

func TestClockSetSpeedRates(t *testing.T) {
	tests := []struct {
		speed float64
		real  time.Duration
		want  uint64 // ticks of 10ms after real time at speed
	}{
		{1, time.Second, 100},
		{2, time.Second, 200},
		{0.5, time.Second, 50},
		{0.5, 20*time.Millisecond - 1, 0},
		{0.5, 20 * time.Millisecond, 1},
		{60, time.Second, 6000},
		{0.001, time.Second, 0},
		{0.001, 10 * time.Second, 1},
		{MinSpeed, 10*time.Second - 1, 0},
		{1e6, time.Millisecond, 100_000},
		{1e6, 10, 1},
		{1e6, 9, 0},
		{0.1, 100 * time.Millisecond, 1},
		{0.1, 100*time.Millisecond - 1, 0},
		{1.5, 20 * time.Millisecond, 3},
	}
	for _, tt := range tests {
		c, src := newTestClock(1000, clockTestTick)
		require.NoError(t, c.SetSpeed(tt.speed))
		src.now += tt.real
		assert.Equal(t, 1000+tt.want, c.Now(), "speed %v real %v", tt.speed, tt.real)
	}
}

// A partial tick is neither lost nor gained when the speed changes.
func TestClockSetSpeedKeepsRemainder(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	require.NoError(t, c.SetSpeed(0.5))
	src.now += 10 * time.Millisecond // 5ms virtual
	require.NoError(t, c.SetSpeed(2))
	src.now += 2500*time.Microsecond - 1 // 5ms-2ns virtual
	assert.Equal(t, uint64(0), c.Now())
	src.now++ // 5ms virtual
	assert.Equal(t, uint64(1), c.Now())

	// The brief's example: 5ms, SetSpeed(1), 5ms at 10ms ticks is exactly 1 tick.
	c, src = newTestClock(0, clockTestTick)
	src.now += 5 * time.Millisecond
	require.NoError(t, c.SetSpeed(1))
	src.now += 5*time.Millisecond - 1
	assert.Equal(t, uint64(0), c.Now())
	src.now++
	assert.Equal(t, uint64(1), c.Now())
}

func TestClockSetSpeedWhileFrozen(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	src.now += 5 * time.Millisecond
	c.Freeze()
	require.NoError(t, c.SetSpeed(10))
	src.now += time.Hour
	assert.Equal(t, uint64(0), c.Now())
	assert.True(t, c.Frozen())
	c.Resume()
	assert.Equal(t, uint64(0), c.Now())
	src.now += 500 * time.Microsecond // 5ms virtual + 5ms kept
	assert.Equal(t, uint64(1), c.Now())
}

func TestClockInvalidSpeed(t *testing.T) {
	bad := []float64{
		0, math.Copysign(0, -1), -1, -60, math.NaN(), math.Inf(1), math.Inf(-1),
		math.Nextafter(MinSpeed, 0), math.Nextafter(MaxSpeed, math.Inf(1)), 1e-300, 1e300,
		math.SmallestNonzeroFloat64, math.MaxFloat64,
	}
	for _, x := range bad {
		c, src := newTestClock(0, clockTestTick)
		require.NoError(t, c.SetSpeed(60))
		src.now += 5 * time.Millisecond // 300ms virtual
		require.Equal(t, uint64(30), c.Now())
		calls := src.calls

		err := c.SetSpeed(x)
		require.ErrorIs(t, err, ErrSpeed, "speed %v", x)
		assert.Equal(t, calls, src.calls, "rejected SetSpeed does not read the source")
		assert.Equal(t, 60.0, c.Speed())
		assert.Equal(t, uint64(30), c.Now())
		src.now += time.Millisecond
		assert.Equal(t, uint64(36), c.Now(), "rate unchanged after rejected speed %v", x)
	}
	c, _ := newTestClock(0, clockTestTick)
	assert.NoError(t, c.SetSpeed(MinSpeed))
	assert.NoError(t, c.SetSpeed(MaxSpeed))
	assert.Equal(t, MaxSpeed, c.Speed())
}

func TestClockSourceBackwards(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	src.now += 35 * time.Millisecond
	require.Equal(t, uint64(3), c.Now())
	origin := src.now - 35*time.Millisecond

	src.now = origin
	assert.Equal(t, uint64(3), c.Now(), "backwards source does not lower the target")
	src.now = origin - time.Hour
	assert.Equal(t, uint64(3), c.Now())
	src.now = origin + 30*time.Millisecond
	assert.Equal(t, uint64(3), c.Now())
	src.now = origin + 40*time.Millisecond
	assert.Equal(t, uint64(4), c.Now(), "time counts again from the largest reading")

	// Backwards across mode and speed changes.
	src.now = origin
	c.Freeze()
	assert.Equal(t, uint64(4), c.Now())
	c.Resume()
	require.NoError(t, c.SetSpeed(2))
	assert.Equal(t, uint64(4), c.Now())
	src.now = origin + 45*time.Millisecond // 5ms past the largest reading
	assert.Equal(t, uint64(5), c.Now(), "5ms real at 2x past the high water mark")
}

func TestClockSaturation(t *testing.T) {
	c, src := newTestClock(math.MaxUint64-2, time.Nanosecond)
	src.now += 1
	assert.Equal(t, uint64(math.MaxUint64-1), c.Now())
	src.now += 10
	assert.Equal(t, uint64(math.MaxUint64), c.Now())
	src.now += time.Hour
	assert.Equal(t, uint64(math.MaxUint64), c.Now())
	require.NoError(t, c.SetSpeed(2))
	c.Freeze()
	c.Resume()
	src.now += time.Hour
	assert.Equal(t, uint64(math.MaxUint64), c.Now(), "saturated stays saturated")
	assert.ErrorIs(t, c.FastForward(1), ErrOverflow)
	d, ok := c.Until(math.MaxUint64)
	assert.True(t, ok)
	assert.Equal(t, time.Duration(0), d)

	// Elapsed ticks alone beyond 2^64: 2^63ns at 1e6× with 1ns ticks.
	src = &fakeClockSource{now: math.MinInt64}
	c = NewClock(0, time.Nanosecond, src.read)
	require.NoError(t, c.SetSpeed(1e6))
	src.now = math.MaxInt64
	assert.Equal(t, uint64(math.MaxUint64), c.Now())
	require.NoError(t, c.SetSpeed(1)) // rebase while saturated
	assert.Equal(t, uint64(math.MaxUint64), c.Now())

	// Just below the limit is exact.
	src = &fakeClockSource{now: 0}
	c = NewClock(math.MaxUint64-uint64(math.MaxInt64), time.Nanosecond, src.read)
	src.now = math.MaxInt64
	assert.Equal(t, uint64(math.MaxUint64), c.Now())
	src = &fakeClockSource{now: 0}
	c = NewClock(math.MaxUint64-uint64(math.MaxInt64)-1, time.Nanosecond, src.read)
	src.now = math.MaxInt64
	assert.Equal(t, uint64(math.MaxUint64-1), c.Now())
}

func TestClockFastForwardOverflow(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		c, src := newTestClock(math.MaxUint64-20, clockTestTick)
		src.now += 105 * time.Millisecond // 10 ticks + 5ms
		if frozen {
			c.Freeze()
		}
		require.Equal(t, uint64(math.MaxUint64-10), c.Now())

		for _, n := range []uint64{11, 12, math.MaxUint64} {
			require.ErrorIs(t, c.FastForward(n), ErrOverflow, "n=%d", n)
			assert.Equal(t, uint64(math.MaxUint64-10), c.Now(), "unchanged after overflow")
			assert.Equal(t, frozen, c.Frozen())
		}
		require.NoError(t, c.FastForward(9))
		assert.Equal(t, uint64(math.MaxUint64-1), c.Now())
		if !frozen {
			src.now += 5 * time.Millisecond // the carried 5ms completes a tick
			assert.Equal(t, uint64(math.MaxUint64), c.Now())
		} else {
			require.NoError(t, c.FastForward(1))
			assert.Equal(t, uint64(math.MaxUint64), c.Now())
		}
		require.ErrorIs(t, c.FastForward(1), ErrOverflow)
		assert.Equal(t, uint64(math.MaxUint64), c.Now())
		require.NoError(t, c.FastForward(0))
	}
}

func TestClockUntil(t *testing.T) {
	tests := []struct {
		name   string
		speed  float64
		target uint64
		want   time.Duration
		ok     bool
	}{
		{"reached", 1, 2, 0, true},
		{"past", 1, 0, 0, true},
		{"next", 1, 3, 5 * time.Millisecond, true},
		{"later", 1, 10, 75 * time.Millisecond, true},
		{"fast", 60, 3, 83334, true},            // 5ms/60 = 83333.3ns, rounded up
		{"fast later", 60, 62, 9_916_667, true}, // (600ms-5ms)/60 = 9916666.7ns, rounded up
		{"slow", 0.5, 3, 10 * time.Millisecond, true},
		// 1/3 as a float64 is slightly below 1/3, so 15ms is 1ns short.
		{"third", 1.0 / 3, 3, 15*time.Millisecond + 1, true},
		{"max speed", 1e6, 3, 5, true},
		{"too far", 1, math.MaxUint64, math.MaxInt64, false},
		{"too far slow", 0.001, 1 << 50, math.MaxInt64, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, src := newTestClock(0, clockTestTick)
			src.now += 25 * time.Millisecond // target 2 plus 5ms
			require.NoError(t, c.SetSpeed(tt.speed))
			d, ok := c.Until(tt.target)
			assert.Equal(t, tt.ok, ok)
			if !ok {
				assert.Equal(t, time.Duration(math.MaxInt64), d)
				return
			}
			// Exactness: d-1 is too early, d is enough.
			if d > 0 {
				before := src.now
				src.now = before + d - 1
				assert.Less(t, c.Now(), tt.target, "one ns early")
				src.now = before + d
			}
			assert.GreaterOrEqual(t, c.Now(), tt.target)
			assert.Equal(t, tt.want, d)
		})
	}
}

func TestClockUntilFrozen(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	src.now += 25 * time.Millisecond
	c.Freeze()
	d, ok := c.Until(3)
	assert.False(t, ok)
	assert.Equal(t, time.Duration(math.MaxInt64), d)
	d, ok = c.Until(2)
	assert.True(t, ok, "already reached, even frozen")
	assert.Equal(t, time.Duration(0), d)
	src.now += time.Hour
	d, ok = c.Until(3)
	assert.False(t, ok)
	assert.Equal(t, time.Duration(math.MaxInt64), d)
	c.Resume()
	d, ok = c.Until(3)
	assert.True(t, ok)
	assert.Equal(t, 5*time.Millisecond, d, "frozen time does not count")
}

func TestClockUntilLaggingSource(t *testing.T) {
	c, src := newTestClock(0, clockTestTick)
	src.now += 25 * time.Millisecond
	require.Equal(t, uint64(2), c.Now())
	src.now -= 7 * time.Millisecond
	d, ok := c.Until(3)
	assert.True(t, ok)
	assert.Equal(t, 12*time.Millisecond, d, "7ms to catch up to the largest reading + 5ms")
	src.now += d - 1
	assert.Equal(t, uint64(2), c.Now())
	src.now++
	assert.Equal(t, uint64(3), c.Now())
}

func TestClockUntilLimits(t *testing.T) {
	// The largest representable wait.
	src := &fakeClockSource{now: 0}
	c := NewClock(0, time.Nanosecond, src.read)
	d, ok := c.Until(math.MaxInt64)
	assert.True(t, ok)
	assert.Equal(t, time.Duration(math.MaxInt64), d)
	d, ok = c.Until(math.MaxInt64 + 1)
	assert.False(t, ok)
	assert.Equal(t, time.Duration(math.MaxInt64), d)

	// A huge tick at the slowest speed overflows the intermediate products.
	c = NewClock(0, math.MaxInt64, src.read)
	require.NoError(t, c.SetSpeed(MinSpeed))
	d, ok = c.Until(math.MaxUint64)
	assert.False(t, ok)
	assert.Equal(t, time.Duration(math.MaxInt64), d)
	d, ok = c.Until(1)
	assert.False(t, ok, "one 2^63ns tick at 0.001× does not fit either")
	assert.Equal(t, time.Duration(math.MaxInt64), d)
}

// clockModel is a reference implementation of the documented semantics in
// big-number arithmetic: virtual time is an integer accumulator of whole
// virtual nanoseconds, floored when folded at Freeze, SetSpeed and
// FastForward.
type clockModel struct {
	start, ff  *big.Int
	tick       *big.Int
	hw, mark   int64
	acc        *big.Int // whole virtual ns folded so far
	speed      *big.Rat
	speedFloat float64
	frozen     bool
}

var clockMaxU64 = new(big.Int).SetUint64(math.MaxUint64)

func (m *clockModel) observe(r int64) {
	if r > m.hw {
		m.hw = r
	}
}

func (m *clockModel) virtual() *big.Int {
	v := new(big.Int).Set(m.acc)
	if !m.frozen {
		el := new(big.Rat).SetInt(new(big.Int).Sub(big.NewInt(m.hw), big.NewInt(m.mark)))
		el.Mul(el, m.speed)
		v.Add(v, new(big.Int).Quo(el.Num(), el.Denom()))
	}
	return v
}

func (m *clockModel) targetBig() *big.Int {
	t := new(big.Int).Quo(m.virtual(), m.tick)
	t.Add(t, m.start)
	return t.Add(t, m.ff)
}

func (m *clockModel) target() uint64 {
	t := m.targetBig()
	if t.Cmp(clockMaxU64) > 0 {
		return math.MaxUint64
	}
	return t.Uint64()
}

func (m *clockModel) fold() {
	m.acc = m.virtual()
	m.mark = m.hw
}

// TestClockModel runs random operations, with a source that jumps back and
// forth, against clockModel, and checks that Now never decreases.
func TestClockModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ticks := []time.Duration{1, 7, time.Microsecond, clockTestTick, 16_666_667, time.Hour, math.MaxInt64}
	speeds := []float64{1, 60, 0.1, 0.5, 2.5, 1.0 / 3, MinSpeed, MaxSpeed, 0, -1, math.NaN(), math.Inf(1), 2e6}
	for run := range 300 {
		tick := ticks[rng.IntN(len(ticks))]
		var start uint64
		switch rng.IntN(3) {
		case 0:
			start = rng.Uint64N(1000)
		case 1:
			start = math.MaxUint64 - rng.Uint64N(1<<40)
		default:
			start = rng.Uint64()
		}
		src := &fakeClockSource{now: time.Duration(rng.Int64N(1<<40) - 1<<39)}
		c := NewClock(start, tick, src.read)
		m := &clockModel{
			start: new(big.Int).SetUint64(start), ff: new(big.Int), tick: big.NewInt(int64(tick)),
			hw: int64(src.now), mark: int64(src.now), acc: new(big.Int), speed: big.NewRat(1, 1), speedFloat: 1,
		}
		last := c.Now()
		for step := range 400 {
			switch op := rng.IntN(20); {
			case op < 8: // advance, mostly forward
				var d time.Duration
				switch rng.IntN(6) {
				case 0:
					d = -time.Duration(rng.Int64N(int64(time.Second)))
				case 1:
					d = time.Duration(rng.Int64N(int64(time.Hour)))
				default:
					d = time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
				}
				if src.now > 0 && d > math.MaxInt64-src.now {
					d = 0
				}
				src.now += d
			case op < 10:
				c.Freeze()
				if !m.frozen {
					m.observe(int64(src.now))
					m.fold()
					m.frozen = true
				}
			case op < 12:
				c.Resume()
				if m.frozen {
					m.observe(int64(src.now))
					m.mark = m.hw
					m.frozen = false
				}
			case op < 14:
				x := speeds[rng.IntN(len(speeds))]
				if rng.IntN(3) == 0 {
					x = MinSpeed + rng.Float64()*10
				}
				err := c.SetSpeed(x)
				if !(x >= MinSpeed && x <= MaxSpeed) {
					require.ErrorIs(t, err, ErrSpeed)
					break
				}
				require.NoError(t, err)
				m.observe(int64(src.now))
				m.fold()
				m.speed = new(big.Rat).SetFloat64(x)
				m.speedFloat = x
			case op < 16:
				var n uint64
				switch rng.IntN(4) {
				case 0:
					n = 0
				case 1:
					n = rng.Uint64()
				default:
					n = rng.Uint64N(1000)
				}
				err := c.FastForward(n)
				if n == 0 {
					require.NoError(t, err)
					break
				}
				m.observe(int64(src.now))
				sum := new(big.Int).Add(m.targetBig(), new(big.Int).SetUint64(n))
				if sum.Cmp(clockMaxU64) > 0 {
					require.ErrorIs(t, err, ErrOverflow, "run %d step %d", run, step)
					break
				}
				require.NoError(t, err)
				m.fold()
				m.ff.Add(m.ff, new(big.Int).SetUint64(n))
			default: // Until, checked by probing copies of the clock
				now := c.Now()
				m.observe(int64(src.now))
				want := uint64(math.MaxUint64)
				if now <= math.MaxUint64-6 {
					want = now + 1 + rng.Uint64N(5)
				}
				d, ok := c.Until(want)
				m.observe(int64(src.now))
				probe := func(at time.Duration) uint64 {
					saved := src.now
					cc := *c
					src.now = at
					got := cc.Now()
					src.now = saved
					return got
				}
				if !ok {
					require.Equal(t, time.Duration(math.MaxInt64), d)
					if !c.Frozen() { // the wait must really exceed math.MaxInt64
						far := time.Duration(math.MaxInt64)
						if src.now <= 0 {
							far += src.now
						}
						require.Less(t, probe(far), want, "run %d step %d", run, step)
					}
					break
				}
				if src.now > 0 && d > math.MaxInt64-src.now {
					break // the source cannot get there
				}
				require.GreaterOrEqual(t, probe(src.now+d), want, "run %d step %d: Until(%d) = %v", run, step, want, d)
				if d > 0 {
					require.Less(t, probe(src.now+d-1), want, "run %d step %d: Until(%d) = %v", run, step, want, d)
				}
			}
			got := c.Now()
			m.observe(int64(src.now))
			require.Equal(t, m.target(), got, "run %d step %d", run, step)
			require.GreaterOrEqual(t, got, last, "run %d step %d: Now decreased", run, step)
			require.Equal(t, m.frozen, c.Frozen())
			require.Equal(t, m.speedFloat, c.Speed())
			last = got
		}
	}
}

func TestSpeedFraction(t *testing.T) {
	tests := []struct {
		x     float64
		mul   uint64
		shift uint
	}{
		{1, 1, 0},
		{60, 60, 0},
		{1e6, 1_000_000, 0},
		{0.5, 1, 1},
		{2.5, 5, 1},
		{0.75, 3, 2},
	}
	for _, tt := range tests {
		mul, shift := speedFraction(tt.x)
		assert.Equal(t, tt.mul, mul, "x=%v", tt.x)
		assert.Equal(t, tt.shift, shift, "x=%v", tt.x)
	}
	for _, x := range []float64{MinSpeed, 0.1, 1.0 / 3, math.Nextafter(MaxSpeed, 0), math.Nextafter(1, 2)} {
		mul, shift := speedFraction(x)
		assert.Less(t, mul, uint64(1)<<53)
		assert.LessOrEqual(t, shift, uint(62))
		assert.Equal(t, uint64(1), mul&1, "x=%v: mul is odd", x)
		assert.Equal(t, x, math.Ldexp(float64(mul), -int(shift)), "x=%v", x)
	}
}

// TestClockFreezeAt: FreezeAt sets the target back (or on) to a tick and
// freezes there, at the tick's start; time then passes uncounted, and
// Resume goes on from that tick's start.
func TestClockFreezeAt(t *testing.T) {
	c, src := newTestClock(100, clockTestTick)
	src.now += 5*clockTestTick + 3*time.Millisecond
	require.NoError(t, c.FastForward(1_000_000))
	require.Equal(t, uint64(1_000_105), c.Now())
	c.FreezeAt(500)
	assert.True(t, c.Frozen())
	tick, sub := c.Instant()
	assert.Equal(t, [2]uint64{500, 0}, [2]uint64{tick, sub}, "frozen at the start of tick 500")
	src.now += time.Hour
	assert.Equal(t, uint64(500), c.Now(), "time passes uncounted while frozen")
	c.Resume()
	src.now += clockTestTick - 1
	assert.Equal(t, uint64(500), c.Now())
	src.now++
	assert.Equal(t, uint64(501), c.Now(), "a whole tick after Resume")
	c.FreezeAt(math.MaxUint64)
	assert.ErrorIs(t, c.FastForward(1), ErrOverflow)
}
