package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestBacklogDeliveredOnBind: events of an unbound receiver are kept and
// delivered in order after the bind reply, and live events continue the
// same sequence.
func TestBacklogDeliveredOnBind(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("admin")
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 2, Data: []byte("x")}) // every 2, forever
	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 3, Repeat: 2})
	a.ff(6) // tid 1 at +2 +4 +6, tid 2 at +3 +6
	assert.Equal(t, uint64(5), a.stats().BacklogEvents)

	c := h.client("c")
	id := c.send(protocol.Request{Op: protocol.OpBind, Receiver: 1})
	// The reply comes first, then the backlog.
	m := c.read()
	require.Equal(t, protocol.KindOK, m.Kind)
	require.Equal(t, id, m.ID)
	assert.Equal(t, []uint64{5, 0, 1}, okUints(t, protocol.OpBind, m))
	var got []string
	for range 5 {
		m := c.read()
		require.Equal(t, protocol.KindFire, m.Kind)
		got = append(got, fireLine(start, m.Fire))
	}
	assert.Equal(t, []string{
		"T+2 r=1 tid=1 fired=1/0 last=false seq=1 data=x",
		"T+3 r=1 tid=2 fired=1/2 last=false seq=2 data=",
		"T+4 r=1 tid=1 fired=2/0 last=false seq=3 data=x",
		"T+6 r=1 tid=1 fired=3/0 last=false seq=4 data=x",
		"T+6 r=1 tid=2 fired=2/2 last=true seq=5 data=",
	}, got)
	assert.Zero(t, a.stats().BacklogEvents)

	// Live events continue the sequence.
	a.ff(2)
	c.ping()
	fs := c.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, uint64(6), fs[0].Seq)
	assert.Equal(t, uint64(start+8), fs[0].Tick)
}

// TestTimersFireWithNoClient: timers added by a session that then leaves
// keep firing; their events wait for whoever binds the receiver.
func TestTimersFireWithNoClient(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("adder")
	a.bind(1, false)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 4})
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 2, Repeat: 1})
	a.close() // nobody has receiver 1

	b := h.client("admin")
	assert.Equal(t, uint64(1), b.stats().Sessions)
	assert.Equal(t, []uint64{start + 10, 5}, b.ff(10))
	st := b.stats()
	assert.Equal(t, uint64(5), st.BacklogEvents)
	assert.Equal(t, uint64(5), st.FiredTotal)
	assert.Zero(t, st.Timers)
	b.close()

	c := h.client("binder")
	backlog, dropped := c.bind(1, false)
	assert.Equal(t, uint64(4), backlog)
	assert.Zero(t, dropped)
	backlog, _ = c.bind(2, false)
	assert.Equal(t, uint64(1), backlog)
	c.ping()
	var got []string
	for _, f := range c.fires() {
		got = append(got, fireLine(start, f))
	}
	assert.Equal(t, []string{
		"T+1 r=1 tid=1 fired=1/4 last=false seq=1 data=",
		"T+2 r=1 tid=1 fired=2/4 last=false seq=2 data=",
		"T+3 r=1 tid=1 fired=3/4 last=false seq=3 data=",
		"T+4 r=1 tid=1 fired=4/4 last=true seq=4 data=",
		"T+2 r=2 tid=1 fired=1/1 last=true seq=1 data=",
	}, got)
}

// TestTakeover: a second session binding a receiver takes it over; the first
// gets a takeover notice naming the new session and no further events.
func TestTakeover(t *testing.T) {
	h := newHarness(t, nil)
	admin := h.client("admin")
	first := h.client("first")
	second := h.client("second")
	first.bind(1, false)
	first.bind(2, false)
	admin.add(protocol.Request{Receiver: 1, Tid: 1, After: 1})
	admin.add(protocol.Request{Receiver: 2, Tid: 1, After: 1})
	admin.ff(1)
	first.ping()
	require.Len(t, first.fires(), 2)

	backlog, _ := second.bind(1, false)
	assert.Zero(t, backlog)
	m := first.read() // pushed without a request of first's
	require.Equal(t, protocol.KindTakeover, m.Kind)
	assert.Equal(t, uint64(1), m.Receiver)
	assert.Equal(t, second.session, m.Session)

	admin.ff(3)
	first.ping()
	second.ping()
	for _, f := range first.fires() {
		assert.Equal(t, uint64(2), f.Receiver, "no events for the receiver taken over")
	}
	fs := second.fires()
	require.Len(t, fs, 3)
	for i, f := range fs {
		assert.Equal(t, uint64(1), f.Receiver)
		assert.Equal(t, uint64(2+i), f.Seq, "seq continues across the takeover")
	}
	// first no longer has it: unbind is not_found, and first may take it back.
	first.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpUnbind, Receiver: 1})
	first.bind(1, false)
	m = second.read()
	require.Equal(t, protocol.KindTakeover, m.Kind)
	assert.Equal(t, first.session, m.Session)

	// A session closing after losing a receiver does not unbind it from its new owner.
	second.close()
	admin.ff(1)
	first.ping()
	assert.Len(t, first.fires(), 2, "receivers 1 and 2")
}

// TestEphemeralBind: closing the session cancels the timers of its
// ephemeral receivers only.
func TestEphemeralBind(t *testing.T) {
	h := newHarness(t, nil)
	admin := h.client("admin")
	s := h.client("s")
	s.bind(1, true)  // ephemeral
	s.bind(2, false) // not
	s.bind(3, true)  // ephemeral, but unbound before the close: its timers stay
	s.bind(4, true)  // ephemeral, but taken over by a durable bind: its timers stay
	for r := uint64(1); r <= 4; r++ {
		s.add(protocol.Request{Receiver: r, Tid: 1, After: 5})
		s.add(protocol.Request{Receiver: r, Tid: 2, After: 10})
	}
	s.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 3})
	other := h.client("other")
	other.bind(4, false)
	assert.Len(t, admin.list(3), 2, "unbind alone does not cancel")

	s.close()
	assert.Empty(t, admin.list(1), "ephemeral receiver's timers are cancelled")
	assert.Len(t, admin.list(2), 2)
	assert.Len(t, admin.list(3), 2)
	assert.Len(t, admin.list(4), 2)
	assert.Equal(t, uint64(6), admin.stats().Timers)

	// The durable receiver's timers keep firing into its backlog.
	admin.ff(5)
	c := h.client("c")
	backlog, _ := c.bind(2, false)
	assert.Equal(t, uint64(1), backlog)
}
