package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestOutboxTotalRoomReachesOthers: a firing that waits because the
// outboxes together are at max_outbox_total (its own outbox empty, so no
// ack of its own will come) goes out when another receiver's ack makes
// room, and its held timer resumes once it is acked.
func TestOutboxTotalRoomReachesOthers(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutboxTotal = 2 })
	a := h.client("a")
	a.bindAck(1)
	a.bindAck(2)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 2})
	a.ff(2)
	a.ping()
	require.Equal(t, []uint64{1, 2}, a.seqs(), "receiver 1 fills the total")
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 1, Every: 1})
	a.ff(1)
	a.ping()
	require.Empty(t, a.fires(), "receiver 2's firing waits: the total is full")

	a.ack(1, 2) // the total has room again
	a.ff(5)
	a.ping()
	fs := a.fires()
	assert.NotEmpty(t, fs, "receiver 2's waiting firing should go out once the total has room")
	// Receiver 2's every-tick timer filled the total again and is held;
	// acking receiver 2 lets its waiting firing out and resumes the timer.
	require.True(t, a.get(2, 1).Paused, "held while the total is full")
	var last uint64
	for _, f := range fs {
		if f.Receiver == 2 {
			last = f.Seq
		}
	}
	require.NotZero(t, last)
	a.ack(2, last)
	a.ping()
	assert.NotEmpty(t, a.fires(), "the waiting firing goes out")
	assert.False(t, a.get(2, 1).Paused, "receiver 2's timer should not stay held")
}

// TestHeldTimerWaitsOnce: a repeating timer whose firing waits is paused
// at once, so that within one long catch-up (a fast-forward, or the
// catch-up after a restart) an every-tick timer adds one waiting firing,
// not one per tick: max_timers bounds what waits.
func TestHeldTimerWaitsOnce(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox, l.MaxTimers, l.MaxTimersPerReceiver = 1, 10, 10 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1})
	a.ff(1000)
	a.ping()
	require.Len(t, a.fires(), 1)
	parked := h.c.Counters().Parked
	assert.LessOrEqual(t, parked, uint64(1), "one held timer adds at most one waiting firing")
	assert.LessOrEqual(t, parked+uint64(h.c.Wheel().Len()), uint64(10), "waiting firings are bounded by max_timers")
}

// TestIdleAckReceiverKeepsMode: a receiver in acknowledged mode that goes
// idle while unbound (all acked, no timers) keeps its mode and its count:
// timers another session adds for it meanwhile fire into its outbox, drop
// nothing past max_backlog, and are numbered after the seqs its client
// handled.
func TestIdleAckReceiverKeepsMode(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklog = 2 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.ff(3)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3}, a.seqs())
	a.ack(1, 3)
	a.close() // the connection drops; everything was acknowledged

	b := h.client("b") // a game server adds timers for the receiver meanwhile
	for tid := uint64(1); tid <= 4; tid++ {
		b.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	b.ff(1)
	b.ping()

	a2 := h.client("a2") // the client is back
	v := a2.bindAck(1)
	a2.ping()
	seqs := a2.seqs()
	assert.Zero(t, v[1], "acknowledged mode drops nothing")
	assert.Len(t, seqs, 4, "all four firings delivered")
	assert.Greater(t, v[2], uint64(3), "first_seq must not reuse seqs 1..3 the client handled")
}
