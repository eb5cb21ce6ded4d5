package wheel

import (
	"errors"
	"math"
	"math/bits"
	"time"
)

// ErrSpeed is returned by SetSpeed when the speed is NaN, infinite or outside
// [MinSpeed, MaxSpeed].
var ErrSpeed = errors.New("wheel: speed must be finite and in [0.001, 1e6]")

// Bounds on the speed accepted by Clock.SetSpeed.
const (
	MinSpeed = 0.001
	MaxSpeed = 1e6
)

// Source reports monotonic elapsed time since some fixed origin. The origin is
// arbitrary (only differences between readings matter) and readings may be
// negative. A Source must not go backwards; if it does, the Clock treats it as
// no time passing until the Source again exceeds the largest reading seen.
//
// In production, use the monotonic clock:
//
//	origin := time.Now()
//	src := func() time.Duration { return time.Since(origin) }
//
// time.Since uses the monotonic reading of origin, so wall-clock steps do not
// affect it. Tests drive a Clock with a fake Source they advance by hand.
type Source func() time.Duration

// A Clock tells the wheel how far tw-time, the wheel's uint64 tick counter,
// should have advanced. It holds no timers and never touches a Wheel: the
// owner reads Now and advances the wheel to it.
//
// While synced (the initial mode), the target tick is
//
//	start + (virtual time elapsed) / tick + fast-forwarded ticks
//
// where virtual time is source time scaled by the speed in force when it
// passed. Frozen, the target moves only by FastForward. Freeze, Resume and
// SetSpeed never make the target jump: time that passes while frozen is never
// counted, and time before a speed change counts at the old speed.
//
// The target never decreases (but by FreezeAt), even if the Source goes
// backwards, and it saturates at math.MaxUint64 instead of wrapping.
//
// A Clock is deterministic: it reads time only through its Source, which it
// calls once in NewClock and once per call of Now, Until, Freeze, Resume,
// SetSpeed and a non-zero FastForward (and never otherwise). It starts no
// goroutines and takes no locks, so it is not safe for concurrent use: one
// goroutine must own it.
//
// Arithmetic is exact integer arithmetic; the float64 speed is used as the
// exact binary fraction it denotes. Virtual time is kept in whole nanoseconds
// and the sub-tick remainder is carried across Freeze, Resume, SetSpeed and
// FastForward, so a partial tick is never lost or gained there. At integer
// speeds (including 1) virtual time is exact. At other speeds each Freeze,
// SetSpeed or non-zero FastForward while synced floors the virtual time since
// the previous such call to a whole nanosecond, dropping less than 1ns of
// virtual time; between those calls there is no drift at all.
type Clock struct {
	src   Source
	tick  uint64 // tick duration in ns, > 0
	speed float64

	// Speed as an exact binary fraction: virtual = real × mul / 2^shift.
	// mul is odd or shift is 0, mul < 2^53, shift <= 62.
	mul   uint64
	shift uint

	frozen bool

	// hw is the largest source reading seen. Time is measured from the high
	// water mark so that a Source going backwards never lowers the target.
	hw time.Duration
	// base is the target tick at source reading mark (the last rebase),
	// saturated at math.MaxUint64; rem (< tick) is the virtual nanoseconds
	// past base's tick boundary that do not yet make a whole tick.
	mark time.Duration
	base uint64
	rem  uint64
}

// NewClock returns a synced Clock at speed 1 whose target is start now, where
// "now" is the reading src returns during this call. Each further tick of
// virtual time advances the target by one.
//
// NewClock panics if tick <= 0 or src is nil.
func NewClock(start uint64, tick time.Duration, src Source) *Clock {
	if tick <= 0 {
		panic("wheel: NewClock with non-positive tick")
	}
	if src == nil {
		panic("wheel: NewClock with nil Source")
	}
	r := src()
	return &Clock{
		src:   src,
		tick:  uint64(tick),
		speed: 1,
		mul:   1,
		hw:    r,
		mark:  r,
		base:  start,
	}
}

// NewFrozenClock returns a Clock as NewClock does, but frozen at the very
// start of tick start: no partial tick is kept, so a duration counted from
// Instant counts from the boundary, and Resume starts the tick afresh.
// (NewClock followed by Freeze keeps the sliver of time between the two
// calls.)
func NewFrozenClock(start uint64, tick time.Duration, src Source) *Clock {
	c := NewClock(start, tick, src)
	c.frozen = true
	return c
}

// Now reads the source and returns the current target tick. Successive
// results never decrease (but after FreezeAt). Once the target reaches math.MaxUint64 it stays
// there.
func (c *Clock) Now() uint64 {
	c.read()
	return c.target()
}

// Instant reads the source and returns the current target tick and sub,
// the virtual nanoseconds of tw-time past that tick's boundary (sub <
// Tick()): where tw-time is inside the current tick. Now returns the same
// tick. Frozen, sub is the partial tick kept since Freeze; once the target
// saturates at math.MaxUint64, sub is 0.
//
// Counting a duration d from Instant rather than from the tick's start is
// what makes a timer "d from now" never early: it is due at the first tick
// boundary at or after tick×Tick()+sub+d.
func (c *Clock) Instant() (tick, sub uint64) {
	c.read()
	if c.frozen {
		return c.base, c.rem
	}
	q, r, ok := c.elapsed()
	t, carry := bits.Add64(c.base, q, 0)
	if !ok || carry != 0 {
		return math.MaxUint64, 0
	}
	return t, r
}

// Tick returns the duration of one tick of virtual time, as given to NewClock.
func (c *Clock) Tick() time.Duration { return time.Duration(c.tick) }

// Frozen reports whether the clock is frozen.
func (c *Clock) Frozen() bool { return c.frozen }

// Speed returns the current speed, the number of virtual seconds per source
// second. It is 1 for a new Clock.
func (c *Clock) Speed() float64 { return c.speed }

// Freeze stops the target: until Resume, it moves only by FastForward. Time
// before the call counts; the target does not change. Freeze on a frozen
// Clock does nothing. The partial tick accumulated so far is kept and
// completes after Resume.
func (c *Clock) Freeze() {
	if c.frozen {
		return
	}
	c.read()
	c.rebase()
	c.frozen = true
}

// FreezeAt freezes the clock with its target at tick t, at the very start of
// that tick (no partial tick is kept), whether t is above or below the
// current target: the one way the target goes back. An admin's fast-forward
// stopped part-way uses it to give back the ticks the wheel has not reached.
func (c *Clock) FreezeAt(t uint64) {
	c.read()
	c.mark = c.hw
	c.base, c.rem = t, 0
	c.frozen = true
}

// Resume returns a frozen Clock to synced mode without a jump: the target
// continues from its frozen value, and the source time that passed while
// frozen never counts. Resume on a synced Clock does nothing.
func (c *Clock) Resume() {
	if !c.frozen {
		return
	}
	c.read()
	c.mark = c.hw
	c.frozen = false
}

// SetSpeed sets the speed to x virtual seconds per source second (60 runs the
// target 60 times faster than real time). The target does not jump: time
// before the call counts at the old speed and time after it at the new one.
// The speed may be set while frozen; it applies after Resume.
//
// SetSpeed returns ErrSpeed, and changes nothing, if x is NaN, infinite or
// outside [MinSpeed, MaxSpeed]. Setting the current speed again is allowed
// and does not change the target.
func (c *Clock) SetSpeed(x float64) error {
	if !(x >= MinSpeed && x <= MaxSpeed) { // also rejects NaN
		return ErrSpeed
	}
	c.read()
	c.rebase()
	c.speed = x
	c.mul, c.shift = speedFraction(x)
	return nil
}

// FastForward advances the target by n ticks at once, in synced or frozen
// mode; the partial tick accumulated so far is kept. FastForward(0) does
// nothing and returns nil.
//
// FastForward returns ErrOverflow, and changes nothing, if the target plus n
// would exceed math.MaxUint64 (so any n > 0 fails once the target has
// saturated).
func (c *Clock) FastForward(n uint64) error {
	if n == 0 {
		return nil
	}
	c.read()
	if c.target() > math.MaxUint64-n {
		return ErrOverflow
	}
	c.rebase() // target() did not saturate, so neither does base
	c.base += n
	return nil
}

// Until reads the source and returns how much more source time must pass
// before Now reaches t at the current speed, assuming no Freeze, SetSpeed or
// FastForward happens meanwhile. The result is exact: once the source has
// advanced by d from its current reading Now returns at least t, and (when
// d > 0) one nanosecond earlier it returns less. A ticker sleeps
// Until(Now()+1) to wake on the next tick boundary without drift.
//
// If Now already reaches t, Until returns (0, true). If the clock is frozen,
// or the wait does not fit in a time.Duration, it returns
// (math.MaxInt64, false).
//
// If the source currently reads less than the largest reading it has
// returned, d includes the time it needs to catch up.
func (c *Clock) Until(t uint64) (d time.Duration, ok bool) {
	r := c.read()
	if c.target() >= t {
		return 0, true
	}
	const never = time.Duration(math.MaxInt64)
	if c.frozen {
		return never, false
	}
	// The target is below t < 2^64, so it did not saturate and base < t.
	// Need the smallest elapsed e with floor(e·mul/2^shift) + rem >= need,
	// need = (t-base)·tick - rem, i.e. e = ceil(need·2^shift / mul).
	nh, nl := bits.Mul64(t-c.base, c.tick)
	var borrow uint64
	nl, borrow = bits.Sub64(nl, c.rem, 0)
	nh -= borrow // (t-base)·tick >= tick > rem: no underflow
	// q1, r1 = need / mul, need % mul (128 by 64 bits).
	qh, rh := nh/c.mul, nh%c.mul
	ql, r1 := bits.Div64(rh, nl, c.mul)
	if qh != 0 || (c.shift > 0 && ql>>(64-c.shift) != 0) {
		return never, false
	}
	// e = q1·2^shift + ceil(r1·2^shift / mul); r1 < mul, so the high word
	// of r1·2^shift is below mul and Div64 cannot overflow.
	q2, r2 := bits.Div64(r1>>(64-c.shift), r1<<c.shift, c.mul)
	if r2 != 0 {
		q2++
	}
	e, carry := bits.Add64(ql<<c.shift, q2, 0)
	if carry != 0 {
		return never, false
	}
	// The target at the high water mark is below t, so e > hw-mark.
	w := e - (uint64(c.hw) - uint64(c.mark))
	w, carry = bits.Add64(w, uint64(c.hw)-uint64(r), 0) // catch up to hw
	if carry != 0 || w > math.MaxInt64 {
		return never, false
	}
	return time.Duration(w), true
}

// read calls the source once, raises the high water mark, and returns the
// reading.
func (c *Clock) read() time.Duration {
	r := c.src()
	if r > c.hw {
		c.hw = r
	}
	return r
}

// target returns the target tick at the high water mark.
func (c *Clock) target() uint64 {
	if c.frozen {
		return c.base
	}
	q, _, ok := c.elapsed()
	if !ok {
		return math.MaxUint64
	}
	t, carry := bits.Add64(c.base, q, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return t
}

// elapsed returns the whole ticks q and leftover virtual nanoseconds r of
// rem plus the virtual time from mark to the high water mark, with ok false
// if q does not fit in a uint64. It ignores frozen.
func (c *Clock) elapsed() (q, r uint64, ok bool) {
	// Readings are int64 with hw >= mark, so the difference is exact in uint64.
	hi, lo := bits.Mul64(uint64(c.hw)-uint64(c.mark), c.mul)
	if c.shift > 0 {
		lo = lo>>c.shift | hi<<(64-c.shift)
		hi >>= c.shift
	}
	var carry uint64
	lo, carry = bits.Add64(lo, c.rem, 0)
	hi += carry // hi < 2^53: cannot wrap
	if hi >= c.tick {
		return 0, 0, false
	}
	q, r = bits.Div64(hi, lo, c.tick)
	return q, r, true
}

// rebase folds the virtual time up to the high water mark into base and rem
// and moves mark to the high water mark. It does not change the target.
func (c *Clock) rebase() {
	if !c.frozen {
		q, r, ok := c.elapsed()
		b, carry := bits.Add64(c.base, q, 0)
		if !ok || carry != 0 {
			b, r = math.MaxUint64, 0
		}
		c.base, c.rem = b, r
	}
	c.mark = c.hw
}

// speedFraction returns mul and shift with x = mul / 2^shift exactly, mul odd
// or shift 0. x must be in [MinSpeed, MaxSpeed], where every float64 is
// normal with exponent in [-10, 19], so shift <= 62 and mul < 2^53.
func speedFraction(x float64) (mul uint64, shift uint) {
	b := math.Float64bits(x)
	mul = b&(1<<52-1) | 1<<52
	exp := int(b>>52&0x7ff) - 1075 // x = mul × 2^exp
	tz := bits.TrailingZeros64(mul)
	mul >>= uint(tz)
	exp += tz
	if exp >= 0 {
		return mul << uint(exp), 0
	}
	return mul, uint(-exp)
}
