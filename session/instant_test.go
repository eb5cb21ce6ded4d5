package session

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// A timer added with after_ns never fires before after_ns of tw-time has
// passed since the instant the Core applied it, and fires at the first
// tick boundary at or after that moment: a property over thousands of
// adds at random sub-tick offsets, durations and clock steps, on a fake
// clock the Core reads through its instant hook. Every repeat firing
// keeps the interval rounded up to whole ticks.
func TestAfterNsNeverEarly(t *testing.T) {
	const tick = 10 * time.Millisecond
	h := newHarness(t, nil)
	var src time.Duration
	clk := wheel.NewClock(start, tick, func() time.Duration { return src })
	h.c.SetInstantHook(clk.Instant)
	s := h.session()
	h.do(s, protocol.Request{Op: protocol.OpBind, Receiver: 1})

	rng := rand.New(rand.NewPCG(3, 4))
	type want struct{ deadline, every uint64 } // virtual ns; ticks
	pending := map[uint64]want{}
	var tid, fired uint64
	for range 20_000 {
		src += time.Duration(rng.Int64N(int64(tick) * 3 / 2))
		h.c.Advance(clk.Now(), 1<<20)
		at, sub := clk.Instant()
		now := at*uint64(tick) + sub
		for _, m := range h.take(s) {
			require.Equal(t, protocol.KindFire, m.Kind)
			f := m.Fire
			w := pending[f.Tid]
			require.GreaterOrEqual(t, now, w.deadline, "tid %d fired %d ns early", f.Tid, w.deadline-now)
			require.GreaterOrEqual(t, f.Tick*uint64(tick), w.deadline, "due before the deadline")
			require.Less(t, (f.Tick-1)*uint64(tick), w.deadline, "not the first boundary at or after the deadline")
			fired++
			if f.Last {
				delete(pending, f.Tid)
			} else {
				pending[f.Tid] = want{f.Tick*uint64(tick) + w.every*uint64(tick), w.every}
			}
		}
		if rng.IntN(2) == 0 {
			tid++
			d := uint64(1 + rng.Int64N(int64(5*tick)))
			if rng.IntN(4) == 0 {
				d = uint64(rng.IntN(5)+1) * uint64(tick) // whole ticks: the boundary itself
			}
			repeat := uint64(1 + rng.IntN(3))
			ms := h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, AfterNs: d, Repeat: repeat})
			require.Equal(t, protocol.KindOK, ms[len(ms)-1].Kind, "%v", ms)
			pending[tid] = want{now + d, (d + uint64(tick) - 1) / uint64(tick)}
		}
	}
	require.Greater(t, fired, uint64(10_000))
}

// A tick-based add counts from the start of the current tick, as it
// always has; after_ns counts from inside it, and is ignored when at is
// given. An after_ns that would pass tw-time 2^64-1 is refused.
func TestAfterNsRules(t *testing.T) {
	const tick = 10 * time.Millisecond
	h := newHarness(t, nil)
	src := 7 * time.Millisecond // 7ms into tick start
	clk := wheel.NewClock(start, tick, func() time.Duration { return src })
	h.c.SetInstantHook(clk.Instant)
	src += 7 * time.Millisecond
	s := h.session()
	due := func(req protocol.Request) uint64 {
		ms := h.do(s, req)
		require.Len(t, ms, 1)
		require.Equal(t, protocol.KindOK, ms[0].Kind, "%v", ms[0])
		v, err := protocol.DecodeUints(ms[0].Result, nil)
		require.NoError(t, err)
		return v[0]
	}
	require.Equal(t, uint64(start+1), due(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 1}), "after 1: the next boundary, 3ms away")
	require.Equal(t, uint64(start+2), due(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 2, AfterNs: uint64(tick)}), "10ms from 7ms in: the boundary at 20ms")
	require.Equal(t, uint64(start+1), due(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 3, AfterNs: uint64(3 * time.Millisecond)}), "3ms from 7ms in: exactly the boundary")
	require.Equal(t, uint64(start+5), due(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 4, AfterNs: 1, At: start + 5}), "at wins")

	// ceil((7ms + 2^64-1) / 10ms) = 1844674407372: the sum needs 65 bits.
	require.Equal(t, uint64(start)+1844674407372,
		due(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 5, AfterNs: math.MaxUint64}), "the longest after_ns")

	// A clock at the end of tw-time: no boundary is left after the instant.
	end := wheel.NewClock(math.MaxUint64-1, tick, func() time.Duration { return src })
	h.c.SetInstantHook(end.Instant)
	ms := h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 6, AfterNs: 2 * uint64(tick)})
	require.Equal(t, protocol.KindError, ms[0].Kind)
	require.Equal(t, protocol.CodeInvalidArgument, ms[0].Code)
	require.Contains(t, ms[0].Text, "after_ns")
}
