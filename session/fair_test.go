package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// A receiver's one timer, added after 20,000 of another receiver's due on
// the same tick, is delivered in the tick's first advance turn (the wheel's
// same-tick order: rounds by receiver), not after the 20 turns of
// max_fires_per_turn that fire the others (issue 24 item 12: 1M timers on
// one cron minute made an unrelated receiver 627 ms late). tw-time moves on
// a tick per turn, as the ticker's do while the wheel trails it: every one
// of the 20,000 still fires once, on its due tick, its late the turns it
// waited; and the replay of the log reproduces all of it (the harness's
// replica).
func TestBigTickOtherReceiverFirstTurn(t *testing.T) {
	const n, perTurn = 20_000, 1000
	h, a, b := bigTick(t, n, perTurn, 100)

	due := uint64(start + 100)
	seen := make([]bool, n)
	bTurn, turns, fired := 0, 0, 0
	for target, more := due, true; more; target++ {
		turns++
		more = h.c.Advance(target, perTurn)
		h.rep.sync()
		for _, m := range h.take(b.s) {
			require.Equal(t, protocol.KindFire, m.Kind)
			require.Zero(t, bTurn, "receiver 2's timer fired twice")
			bTurn = turns
			assert.Equal(t, due, m.Fire.Tick)
			assert.Zero(t, m.Fire.Late)
		}
		for _, m := range h.take(a.s) {
			require.Equal(t, protocol.KindFire, m.Kind)
			f := m.Fire
			require.False(t, seen[f.Tid], "tid %d fired twice", f.Tid)
			seen[f.Tid] = true
			fired++
			require.Equal(t, due, f.Tick, "tid %d", f.Tid)
			require.Equal(t, target-due, f.Late, "tid %d: late is the ticks tw-time is past its due tick", f.Tid)
		}
	}
	assert.Equal(t, 1, bTurn, "receiver 2's event was written in this advance turn of the tick")
	assert.Equal(t, n, fired)
	assert.Equal(t, n/perTurn+1, turns, "turns of the tick (the last finds it done)")
}

// A snapshot taken part-way through a big tick restores a Core that goes on
// exactly as the live one: the rest of the tick in the same order (the
// wheel's snapshot holds the order of the timers due and not fired yet),
// so after each later turn both hold the same events, with the same late,
// and snapshot to the same bytes. Receivers 1 and 2 (unbound: their events
// wait in their backlogs, which the snapshots hold) have 3,000 timers each
// due on one tick, 1's added first; in add order, the turns after the
// restore would fire 1's rest before any of 2's.
func TestBigTickSnapshotMidTick(t *testing.T) {
	const n, perTurn = 3000, 1000
	h := newHarness(t, func(c *Config, l *Limits) { c.MaxFiresPerTurn = perTurn; l.MaxBacklog = 2 * n })
	a := h.client("a")
	for _, r := range []uint64{1, 2} {
		for tid := range uint64(n) {
			h.send(a.s, protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: tid, After: 100, Repeat: 1})
		}
	}
	h.take(a.s)
	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		b, _ := snap.AppendNext(nil, 0)
		return b
	}
	due := uint64(start + 100)
	require.True(t, h.c.Advance(due, perTurn), "the tick is not done in one turn")
	data := encode(h.c)
	r, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)
	require.Equal(t, data, encode(r))
	for target, more := due+1, true; more; target++ {
		more = h.c.Advance(target, perTurn)
		h.rep.sync()
		require.Equal(t, more, r.Advance(target, perTurn))
		require.Equal(t, encode(h.c), encode(r), "after the turn to %d", target)
	}
	for _, id := range []uint64{1, 2} {
		require.Equal(t, n, r.receivers[id].n, "receiver %d's events", id)
	}
}

// A receiver's timer due on the tick after another receiver's 20,000 is
// delivered in the first advance turn that reaches its tick (the wheel's
// rotation: a bounded Advance that finds a backlog moves on a tick and the
// timers due then join it), not after the 20 turns of max_fires_per_turn
// that fire the others (issue 24 item 12, the next tick: before, firings
// stayed in due-tick order and it waited for all 20,000). tw-time moves on
// a tick per turn, as the ticker's do: every one of the 20,000 still fires
// once, its Tick its due tick and its late the ticks tw-time is past it;
// receiver 2's is on time; and the replay of the log reproduces all of it
// (the harness's replica).
func TestBigTickNextTickOtherReceiver(t *testing.T) {
	const n, perTurn = 20_000, 1000
	h, a, b := bigTick(t, n, perTurn, 101)

	due := uint64(start + 100)
	seen := make([]bool, n)
	bTurn, turns, fired := 0, 0, 0
	for target, more := due, true; more; target++ {
		turns++
		more = h.c.Advance(target, perTurn)
		h.rep.sync()
		if more {
			require.Equal(t, target-due, h.c.Stats().Lag, "lag counts from the oldest timer still due")
		}
		for _, m := range h.take(b.s) {
			require.Equal(t, protocol.KindFire, m.Kind)
			require.Zero(t, bTurn, "receiver 2's timer fired twice")
			bTurn = turns
			assert.Equal(t, due+1, m.Fire.Tick)
			assert.Zero(t, m.Fire.Late)
		}
		var last uint64
		for i, m := range h.take(a.s) {
			require.Equal(t, protocol.KindFire, m.Kind)
			f := m.Fire
			require.False(t, seen[f.Tid], "tid %d fired twice", f.Tid)
			if i > 0 {
				require.Greater(t, f.Tid, last, "receiver 1's events in add order")
			}
			last = f.Tid
			seen[f.Tid] = true
			fired++
			require.Equal(t, due, f.Tick, "tid %d", f.Tid)
			require.Equal(t, target-due, f.Late, "tid %d: late is the ticks tw-time is past its due tick", f.Tid)
		}
	}
	assert.Equal(t, 2, bTurn, "receiver 2's event was written in this advance turn (the first to reach its tick)")
	assert.Equal(t, n, fired)
	assert.Equal(t, n/perTurn+1, turns, "turns of the backlog (the last finds it done)")
}

// A snapshot taken while a backlog drains, the wheel a few ticks ahead of
// it (receiver 1's 3,000 timers of one tick; receiver 2's and 3's of the
// ticks after it joined in rotation), restores a Core that goes on exactly
// as the live one: after each later turn both hold the same events, with
// the same late, and snapshot to the same bytes (the wheel's snapshot
// holds the firing order and each due timer's lateness). The receivers
// are unbound: their events wait in their backlogs, which the snapshots
// hold.
func TestBacklogSnapshotMidRotation(t *testing.T) {
	const n, perTurn = 3000, 500
	h := newHarness(t, func(c *Config, l *Limits) { c.MaxFiresPerTurn = perTurn; l.MaxBacklog = 2 * n })
	a := h.client("a")
	for tid := range uint64(n) {
		h.send(a.s, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 100, Repeat: 1})
	}
	for tid := range uint64(40) {
		h.send(a.s, protocol.Request{Op: protocol.OpAdd, Receiver: 2 + tid%2, Tid: tid, After: 101 + tid/4, Every: 3, Repeat: 2})
	}
	h.take(a.s)
	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		b, _ := snap.AppendNext(nil, 0)
		return b
	}
	due := uint64(start + 100)
	target := due
	for ; target < due+3; target++ {
		require.True(t, h.c.Advance(target, perTurn), "the backlog is not done in %d turns", target-due+1)
	}
	data := encode(h.c)
	r, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)
	require.Equal(t, data, encode(r))
	for more := true; more || target <= due+20; target++ { // the last timers are due at due+13
		more = h.c.Advance(target, perTurn)
		h.rep.sync()
		require.Equal(t, more, r.Advance(target, perTurn))
		require.Equal(t, encode(h.c), encode(r), "after the turn to %d", target)
	}
	require.Equal(t, n, r.receivers[1].n, "receiver 1's events")
	require.Equal(t, 80, r.receivers[2].n+r.receivers[3].n, "receivers 2 and 3's events")
}

// bigTick makes a harness firing at most perTurn timers a turn, with n
// one-shot timers of receiver 1 (bound by a session) due in 100 ticks and
// one of receiver 2 due in bAfter ticks, each bound by its own session.
func bigTick(t *testing.T, n int, perTurn int, bAfter uint64) (h *harness, a, b *client) {
	h = newHarness(t, func(c *Config, _ *Limits) { c.MaxFiresPerTurn = perTurn })
	a, b = h.client("a"), h.client("b")
	a.bind(1, false)
	b.bind(2, false)
	var adds []byte
	for tid := range uint64(n) {
		adds = protocol.AppendRequest(adds, &protocol.Request{Op: protocol.OpAdd, ID: tid + 1, Receiver: 1, Tid: tid, After: 100, Repeat: 1})
	}
	for len(adds) > 0 {
		payload, k, err := protocol.SplitFrame(adds, 1<<20)
		require.NoError(t, err)
		h.apply(a.s, payload)
		adds = adds[k:]
	}
	require.Len(t, h.take(a.s), n)
	b.add(protocol.Request{Receiver: 2, Tid: 1, After: bAfter, Repeat: 1})
	return h, a, b
}
