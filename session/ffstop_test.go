package session

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestFreezeStopsFastForward: a freeze from another session stops a
// fast-forward that is still firing (a repeating timer makes a million
// ticks take 100,000 turns here) where the wheel is: tw-time goes back to
// the wheel's tick, the clock is set there frozen (ClockStopAt), the
// fast-forward's reply says where it stopped, and later adds are due after
// that tick. A replay of the records stops at the same tick (the harness
// checks it at cleanup).
func TestFreezeStopsFastForward(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.MaxFiresPerTurn = 10 })
	clock := uint64(start)
	var stops []uint64
	h.c.SetClockHook(func(op ClockOp, _ float64, ticks uint64) uint64 {
		switch op {
		case ClockFastForward:
			clock += ticks
		case ClockStopAt:
			stops = append(stops, ticks)
			clock = ticks
		}
		return clock
	})
	a, b := h.client("ff"), h.client("admin")
	a.bind(1, false)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1}) // every tick, forever
	const far = 1_000_000
	ffID := a.send(protocol.Request{Op: protocol.OpFastForward, Ticks: far})
	for range 5 {
		require.True(t, h.advance(), "the fast-forward has work left")
	}
	stopped := b.uints(protocol.Request{Op: protocol.OpFreeze})
	require.Len(t, stopped, 1)
	at := stopped[0]
	assert.Less(t, at, uint64(start+far), "freeze stopped the fast-forward short of its target")
	assert.Greater(t, at, uint64(start), "the fast-forward had moved on before it was stopped")
	assert.Equal(t, []uint64{at}, stops, "the clock is set back to where the wheel is")

	m := a.reply(ffID)
	v := okUints(t, protocol.OpFastForward, m)
	require.Len(t, v, 2)
	assert.Equal(t, at, v[0], "the fast-forward's reply says where it stopped")
	assert.Equal(t, at-start, v[1], "one firing per tick up to where it stopped")
	for _, e := range a.events {
		assert.LessOrEqual(t, e.Fire.Tick, at, "no event after where it stopped")
	}
	assert.False(t, h.advance(), "nothing left to do")
	assert.Equal(t, at, b.ping())
	st := b.stats()
	assert.True(t, st.Frozen)
	assert.Equal(t, at, st.Now)
	assert.Equal(t, at+5, b.add(protocol.Request{Receiver: 2, Tid: 1, After: 5}))

	// A freeze with no fast-forward running changes nothing.
	assert.Equal(t, []uint64{at}, b.uints(protocol.Request{Op: protocol.OpFreeze}))
	assert.Len(t, stops, 1)
}

// TestFastForwardHeadroom: a fast-forward may take tw-time up to
// 2^64-2^62 and no further, so that timers can still be added after it (one
// toward 2^64 left tw-time saturated and every later add refused).
func TestFastForwardHeadroom(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("ff")
	text := c.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpFastForward, Ticks: MaxFastForwardTick - start + 1})
	assert.Contains(t, text, fmt.Sprintf("at most 2^64-2^62 (%d)", uint64(MaxFastForwardTick)))
	assert.Equal(t, uint64(start), c.ping(), "a refused fast-forward changes nothing")
	assert.Equal(t, []uint64{MaxFastForwardTick, 0}, c.ff(MaxFastForwardTick-start))
	c.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpFastForward, Ticks: 1})
	assert.Equal(t, []uint64{MaxFastForwardTick, 0}, c.ff(0))
	assert.Equal(t, uint64(MaxFastForwardTick+1000), c.add(protocol.Request{Receiver: 1, Tid: 1, After: 1000}),
		"timers can still be added")
}
