package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// TestZeroAndPastDelaysFireAtTheNextTick: an add whose first firing is
// not in the future (after 0, at now, at a tick already passed) is due at
// the next tick instead of being refused invalid_argument, and its first
// event's late says how many ticks in the past it was asked for; later
// firings are on time. (Refused invalid_argument before issue 27.)
func TestZeroAndPastDelaysFireAtTheNextTick(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	a.bind(1, false)
	now := a.ping()
	adds := []protocol.Request{
		{Receiver: 1, Tid: 1, Repeat: 1},                         // after 0
		{Receiver: 1, Tid: 2, At: now, Repeat: 1},                // at now
		{Receiver: 1, Tid: 3, At: now - 5, Repeat: 1},            // 5 ticks ago
		{Receiver: 1, Tid: 4, At: 1, Repeat: 1},                  // the first tick there is
		{Receiver: 1, Tid: 5, At: now - 2, Every: 10, Repeat: 2}, // repeats on its interval
		{Receiver: 1, Tid: 6, At: now - 3, Repeat: 3},            // every 0: the first delay, 1 tick
	}
	for _, req := range adds {
		assert.Equal(t, now+1, a.add(req), "tid %d is due at the next tick", req.Tid)
	}
	assert.Equal(t, uint64(1), a.get(1, 6).Every, "every 0 is the first delay: 1 tick")
	assert.Equal(t, now+1, a.get(1, 3).Due)

	a.ff(12)
	a.ping()
	type fired struct{ tid, tick, late uint64 }
	var got []fired
	for _, f := range a.fires() {
		got = append(got, fired{f.Tid, f.Tick, f.Late})
	}
	assert.Equal(t, []fired{
		{1, now + 1, 0}, {2, now + 1, 0}, {3, now + 1, 5}, {4, now + 1, now - 1},
		{5, now + 1, 2}, {6, now + 1, 3},
		{6, now + 2, 0}, {6, now + 3, 0}, // on time after the first
		{5, now + 11, 0},
	}, got)
}

// TestPastDelayLateAddsUp: the ticks an add was overdue add to how late
// its first firing is for any other reason: the wheel trailing tw-time,
// or (acknowledged mode) the ticks it waited for room in a full outbox.
// A replace with a future delay forgets them; a snapshot keeps them.
func TestPastDelayLateAddsUp(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.bind(1, false)
	a.bindAck(2)
	now := a.ping()
	a.add(protocol.Request{Receiver: 1, Tid: 1, At: now - 4, Repeat: 1})
	a.add(protocol.Request{Receiver: 1, Tid: 2, At: now - 4, Repeat: 1})
	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 1, Repeat: 1, Replace: true}) // no longer overdue
	a.add(protocol.Request{Receiver: 2, Tid: 1, After: 1, Repeat: 1})                // fills the outbox
	a.add(protocol.Request{Receiver: 2, Tid: 2, At: now - 4, Repeat: 1})             // waits for room

	c2 := restoreCopy(t, h.c)
	assert.Equal(t, h.c.sched.plans[key(1, 1)].overdue, c2.sched.plans[key(1, 1)].overdue, "a snapshot keeps it")
	assert.Equal(t, uint64(4), c2.sched.plans[key(1, 1)].overdue)

	h.tick(3) // the clock: the wheel fires 2 ticks late
	a.ping()
	fs := a.fires()
	require.Len(t, fs, 3) // in rounds by receiver: 1/1, 2/1, then 1/2
	assert.Equal(t, [3]uint64{1, 1, 4 + 2}, [3]uint64{fs[0].Receiver, fs[0].Tid, fs[0].Late}, "overdue 4, fired 2 late")
	assert.Equal(t, uint64(2), fs[1].Receiver)
	assert.Equal(t, [3]uint64{1, 2, 2}, [3]uint64{fs[2].Receiver, fs[2].Tid, fs[2].Late}, "the replace is not overdue")
	h.tick(10)
	a.ack(2, fs[1].Seq)
	a.ping()
	fs = a.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, [3]uint64{2, 2, 4 + 2 + 10}, [3]uint64{fs[0].Receiver, fs[0].Tid, fs[0].Late}, "overdue 4, fired 2 late, waited 10")
	assert.Empty(t, h.c.sched.plans, "a plan kept for overdue alone goes with the first firing")
}

func key(receiver, tid uint64) wheel.Key { return wheel.Key{Receiver: receiver, Tid: tid} }
