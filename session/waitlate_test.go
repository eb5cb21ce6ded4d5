package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// tick moves tw-time on by n ticks as the clock does (not a
// fast-forward), running the advance turns the server's loop would.
func (h *harness) tick(n uint64) {
	h.c.Advance(h.c.Now()+n, h.c.cfg.MaxFiresPerTurn)
	if h.rep != nil {
		h.rep.sync()
	}
	h.catchUp()
}

// waitLates returns tid 2's fire event's late after the scenario: in
// acknowledged mode with max_outbox 1, tid 1 fills the outbox, tid 2's
// firing (due at start+due) waits for room; then wait moves tw-time on
// and receiver 1's event is acked, letting tid 2's firing out.
func waitLate(t *testing.T, fire func(c *client), wait func(h *harness, c *client)) protocol.Fire {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 10, Repeat: 1})
	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 10, Repeat: 1})
	fire(a)
	a.ping()
	fs := a.fires()
	require.Len(t, fs, 1, "tid 2's firing waits for room")
	require.Equal(t, uint64(1), fs[0].Tid)
	wait(h, a)
	a.ack(1, fs[0].Seq)
	a.ping()
	fs = a.fires()
	require.Len(t, fs, 1, "the ack lets the waiting firing out")
	require.Equal(t, uint64(2), fs[0].Tid)
	require.Equal(t, uint64(start+10), fs[0].Tick)
	return fs[0]
}

// TestWaitingFiringLateCountsTheWait: a firing that waited for room in a
// full outbox reports in late every tick of tw-time it waited, whether
// tw-time moved by the clock or by a fast-forward, on top of how late it
// fired; ticks a fast-forward jumped over before it fired do not count.
// (The server sent late 0 when a fast-forward had ever passed the
// firing's tick, however long it waited after.)
func TestWaitingFiringLateCountsTheWait(t *testing.T) {
	byClock := func(c *client) { c.h.tick(10) }
	byFF := func(c *client) { c.ff(10) }
	t.Run("clock then clock", func(t *testing.T) {
		f := waitLate(t, byClock, func(h *harness, _ *client) { h.tick(30) })
		require.Equal(t, uint64(30), f.Late)
	})
	t.Run("fast-forward then clock", func(t *testing.T) {
		f := waitLate(t, byFF, func(h *harness, _ *client) { h.tick(30) })
		require.Equal(t, uint64(30), f.Late, "due on a jumped-over tick, then waited 30 ticks of the clock")
	})
	t.Run("fast-forward then fast-forward", func(t *testing.T) {
		f := waitLate(t, byFF, func(_ *harness, c *client) { c.ff(30) })
		require.Equal(t, uint64(30), f.Late, "a fast-forward while the firing waits counts as waiting")
	})
	t.Run("clock late then fast-forward", func(t *testing.T) {
		// The wheel is 5 ticks behind when the firing comes due (a burst):
		// it fires 5 late, then waits through a fast-forward of 30.
		f := waitLate(t, func(c *client) { c.h.c.Advance(c.h.c.Now()+15, 0); c.h.rep.sync(); c.h.catchUp() },
			func(_ *harness, c *client) { c.ff(30) })
		require.Equal(t, uint64(35), f.Late)
	})
	t.Run("no wait", func(t *testing.T) {
		f := waitLate(t, byFF, func(*harness, *client) {})
		require.Zero(t, f.Late, "asked for at once and sent at once")
	})
}
