package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// stateHarness drives a state directly, with no event loop or sockets, so a
// test can stop between two advance turns.
type stateHarness struct {
	t  testing.TB
	st *state
}

type noConn struct{}

func (noConn) OutboundBuffered() int { return 0 }

func newStateHarness(t testing.TB, mutate func(*Config)) *stateHarness {
	cfg := Config{Frozen: true, StartTick: start, AdminToken: testAdminToken}
	if mutate != nil {
		mutate(&cfg)
	}
	cfg, err := cfg.withDefaults()
	require.NoError(t, err)
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	c := wheel.NewClock(start, cfg.Tick, func() time.Duration { return 0 })
	c.Freeze()
	return &stateHarness{t: t, st: newState(cfg, testLogger(), w, c)}
}

// session opens a session that has said hello with the admin token.
func (h *stateHarness) session() *session {
	s := h.st.open(noConn{})
	h.do(s, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "t", Token: testAdminToken})
	return s
}

// do handles one request from s and returns what s was sent meanwhile.
func (h *stateHarness) do(s *session, req protocol.Request) []protocol.Message {
	h.st.handle(s, protocol.AppendRequest(nil, &req)[4:])
	return h.take(s)
}

// take decodes and clears s's pending output.
func (h *stateHarness) take(s *session) []protocol.Message {
	var ms []protocol.Message
	for b := s.out; len(b) > 0; {
		payload, n, err := protocol.SplitFrame(b, 1<<30)
		require.NoError(h.t, err)
		var m protocol.Message
		require.NoError(h.t, protocol.DecodeMessage(payload, &m))
		m.Result = append([]byte(nil), m.Result...)
		ms = append(ms, m)
		b = b[n:]
	}
	s.out = s.out[:0]
	return ms
}

// TestAddWhileWheelCatchesUp: while the wheel trails tw-time (a fast-forward
// proceeding one firing per turn), another session's add counts "after"
// from tw-time, not from the wheel's position, so the new timer does not fire
// with the ticks already gone by; "at" at or before tw-time is in the past;
// ping and hello report tw-time.
func TestAddWhileWheelCatchesUp(t *testing.T) {
	h := newStateHarness(t, func(c *Config) { c.MaxFiresPerTurn = 1 })
	a, b := h.session(), h.session()
	h.do(a, protocol.Request{Op: protocol.OpBind, Receiver: 1})
	h.do(b, protocol.Request{Op: protocol.OpBind, Receiver: 2})
	for tid := range uint64(3) {
		h.do(a, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 1}) // every tick, forever
	}
	const ticks = 10
	target := uint64(start + ticks)
	fromA := h.do(a, protocol.Request{Op: protocol.OpFastForward, Ticks: ticks})
	require.Less(t, h.st.wheel.Now(), target-1, "the wheel trails tw-time")

	ok := func(m []protocol.Message) []uint64 {
		require.Len(t, m, 1)
		return okUints(t, protocol.OpPing, m[0])
	}
	assert.Equal(t, []uint64{target}, ok(h.do(b, protocol.Request{Op: protocol.OpPing})), "ping is tw-time")
	assert.Equal(t, []uint64{target + 1}, ok(h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 1, After: 1, Repeat: 1})),
		"after counts from tw-time")
	assert.Equal(t, []uint64{target + 4}, ok(h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 2, At: target + 4, Repeat: 2})))
	m := h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 3, At: target})
	require.Len(t, m, 1)
	assert.Equal(t, protocol.CodeInvalidArgument, m[0].Code, "at == tw-time is in the past")
	m = h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 3, After: 0})
	require.Len(t, m, 1)
	assert.Equal(t, protocol.CodeInvalidArgument, m[0].Code, "after 0 with no at")
	var hello protocol.Hello
	c := h.st.open(noConn{})
	m = h.do(c, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "late"})
	require.Len(t, m, 1)
	require.NoError(t, protocol.DecodeHello(m[0].Result, &hello))
	assert.Equal(t, target, hello.Now, "hello reports tw-time")

	for h.st.advance() {
	}
	assert.Equal(t, target, h.st.wheel.Now())
	fromA = append(fromA, h.take(a)...)
	require.Len(t, fromA, 3*ticks+1, "a's firings, then its fast-forward reply")
	assert.Equal(t, []uint64{target, 3 * ticks}, okUints(t, protocol.OpFastForward, fromA[3*ticks]))
	assert.Empty(t, h.take(b), "b's timers did not fire during the catch-up")

	h.do(a, protocol.Request{Op: protocol.OpFastForward, Ticks: 8})
	for h.st.advance() {
	}
	var got [][2]uint64 // tid, tick
	for _, m := range h.take(b) {
		require.Equal(t, protocol.KindFire, m.Kind)
		got = append(got, [2]uint64{m.Fire.Tid, m.Fire.Tick})
	}
	// tid 2's interval is its first delay counted from tw-time (4), not
	// from the wheel's position when it was added.
	assert.Equal(t, [][2]uint64{{1, target + 1}, {2, target + 4}, {2, target + 8}}, got)
}
