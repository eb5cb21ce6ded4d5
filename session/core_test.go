package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestAddWhileWheelCatchesUp: while the wheel trails tw-time (a fast-forward
// proceeding one firing per turn), another session's add counts "after"
// from tw-time, not from the wheel's position, so the new timer does not fire
// with the ticks already gone by; "at" at or before tw-time is in the past;
// ping and hello report tw-time.
func TestAddWhileWheelCatchesUp(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.MaxFiresPerTurn = 1 })
	a, b := h.session(), h.session()
	h.do(a, protocol.Request{Op: protocol.OpBind, Receiver: 1})
	h.do(b, protocol.Request{Op: protocol.OpBind, Receiver: 2})
	for tid := range uint64(3) {
		h.do(a, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 1}) // every tick, forever
	}
	const ticks = 10
	target := uint64(start + ticks)
	fromA := h.do(a, protocol.Request{Op: protocol.OpFastForward, Ticks: ticks})
	require.Less(t, h.c.wheel.Now(), target-1, "the wheel trails tw-time")

	ok := func(m []protocol.Message) []uint64 {
		require.Len(t, m, 1)
		return okUints(t, protocol.OpPing, m[0])
	}
	assert.Equal(t, []uint64{target}, ok(h.do(b, protocol.Request{Op: protocol.OpPing})), "ping is tw-time")
	assert.Equal(t, []uint64{target + 1}, ok(h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 1, After: 1, Repeat: 1})),
		"after counts from tw-time")
	assert.Equal(t, []uint64{target + 4}, ok(h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 2, At: target + 4, Repeat: 2})))
	assert.Equal(t, []uint64{target + 1}, ok(h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 3, At: target, Repeat: 1})),
		"at == tw-time is not in the future: due at the next tick of tw-time, not of the wheel")
	assert.Equal(t, []uint64{target + 1}, ok(h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 4, After: 0, Repeat: 1})),
		"after 0: the next tick of tw-time")
	var hello protocol.Hello
	c := h.c.Open()
	m := h.do(c, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "late"})
	require.Len(t, m, 1)
	require.NoError(t, protocol.DecodeHello(m[0].Result, &hello))
	assert.Equal(t, target, hello.Now, "hello reports tw-time")

	for h.advance() {
	}
	assert.Equal(t, target, h.c.wheel.Now())
	fromA = append(fromA, h.take(a)...)
	require.Len(t, fromA, 3*ticks+1, "a's firings, then its fast-forward reply")
	assert.Equal(t, []uint64{target, 3 * ticks}, okUints(t, protocol.OpFastForward, fromA[3*ticks]))
	assert.Empty(t, h.take(b), "b's timers did not fire during the catch-up")

	h.do(a, protocol.Request{Op: protocol.OpFastForward, Ticks: 8})
	for h.advance() {
	}
	var got [][2]uint64 // tid, tick
	for _, m := range h.take(b) {
		require.Equal(t, protocol.KindFire, m.Kind)
		got = append(got, [2]uint64{m.Fire.Tid, m.Fire.Tick})
	}
	// tid 2's interval is its first delay counted from tw-time (4), not
	// from the wheel's position when it was added.
	assert.Equal(t, [][2]uint64{{1, target + 1}, {3, target + 1}, {4, target + 1}, {2, target + 4}, {2, target + 8}}, got)
}
