package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// bindAck binds receiver in acknowledged mode and returns the reply's
// [delivered, dropped, first_seq].
func (c *client) bindAck(receiver uint64) []uint64 {
	c.t.Helper()
	return c.uints(protocol.Request{Op: protocol.OpBind, Receiver: receiver, Ack: true})
}

// ack acknowledges receiver's events up to seq.
func (c *client) ack(receiver, seq uint64) {
	c.t.Helper()
	c.uints(protocol.Request{Op: protocol.OpAck, Receiver: receiver, Seq: seq})
}

// seqs returns the seqs of the fire events read so far, and forgets them.
func (c *client) seqs() []uint64 {
	c.t.Helper()
	var out []uint64
	for _, f := range c.fires() {
		out = append(out, f.Seq)
	}
	return out
}

// TestAckRedeliveredAfterClose: events not acknowledged when the session
// closes come again, same seqs, to the next bind; acknowledged ones do not.
func TestAckRedeliveredAfterClose(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	assert.Equal(t, []uint64{0, 0, 1}, a.bindAck(1))
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 5})
	a.ff(5)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, a.seqs())
	a.ack(1, 2)
	assert.Equal(t, 3, h.c.Receivers()[0].Backlog, "the outbox keeps 3..5")
	a.close()

	b := h.client("b")
	assert.Equal(t, []uint64{3, 0, 3}, b.bindAck(1), "three follow, from seq 3")
	b.ping()
	assert.Equal(t, []uint64{3, 4, 5}, b.seqs())
	b.ack(1, 5)
	assert.Zero(t, h.c.Receivers()[0].Backlog)
	assert.Zero(t, b.stats().DroppedTotal, "nothing was dropped or lost")
}

// TestAckTakeover: a takeover while events are unacknowledged gives them to
// the new session from the first unacknowledged seq; the old session's
// acks no longer count.
func TestAckTakeover(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	a.bindAck(7)
	a.add(protocol.Request{Receiver: 7, Tid: 1, After: 1, Repeat: 4})
	a.ff(4)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3, 4}, a.seqs())
	a.ack(7, 1)

	b := h.client("b")
	assert.Equal(t, []uint64{3, 0, 2}, b.bindAck(7))
	b.ping()
	assert.Equal(t, []uint64{2, 3, 4}, b.seqs())
	a.ping()
	require.Len(t, a.events, 1)
	assert.Equal(t, protocol.KindTakeover, a.events[0].Kind)
	a.events = nil
	a.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpAck, Receiver: 7, Seq: 4})
	assert.Equal(t, 3, h.c.Receivers()[0].Backlog, "the old session's ack changed nothing")
	b.ack(7, 4)
	assert.Zero(t, h.c.Receivers()[0].Backlog)
}

// TestAckErrors: an ack past the last event sent, of a receiver not bound
// here, or not in acknowledged mode, is an error that changes nothing; one
// at or below the acknowledged seq is a no-op.
func TestAckErrors(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	a.bindAck(1)
	a.bind(2, false)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.ff(3)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3}, a.seqs())

	text := a.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpAck, Receiver: 1, Seq: 4})
	assert.Contains(t, text, "past the last event delivered")
	a.failCode(protocol.CodeNotFound, protocol.Request{Op: protocol.OpAck, Receiver: 3, Seq: 1})
	text = a.failCode(protocol.CodeInvalidArgument, protocol.Request{Op: protocol.OpAck, Receiver: 2, Seq: 0})
	assert.Contains(t, text, "not bound in acknowledged mode")
	assert.Equal(t, 3, h.c.Receivers()[0].Backlog, "errors change nothing")

	a.ack(1, 2)
	a.ack(1, 1) // below: no-op
	a.ack(1, 0)
	assert.Equal(t, 1, h.c.Receivers()[0].Backlog)
	a.ack(1, 3)
	assert.Zero(t, h.c.Receivers()[0].Backlog)
}

// TestOutboxFullFiringsWait: past max_outbox firings wait, unnumbered, a
// repeating timer is held paused, the waiting firings count as timers;
// acks let them in, in firing order, numbered then and late by the wait.
func TestOutboxFullFiringsWait(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox, l.MaxTimersPerReceiver = 3, 8 })
	a := h.client("a")
	a.bindAck(1)
	for tid := uint64(1); tid <= 5; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 2, Repeat: 1})
	}
	a.add(protocol.Request{Receiver: 1, Tid: 9, After: 1, Every: 1}) // forever, every tick
	a.ff(2)
	a.ping()
	fs := a.fires()
	require.Len(t, fs, 3, "the outbox holds 3")
	assert.Equal(t, []string{ // timers due on one tick fire in the order they were added
		"T+1 r=1 tid=9 fired=1/0 last=false seq=1 data=",
		"T+2 r=1 tid=1 fired=1/1 last=true seq=2 data=",
		"T+2 r=1 tid=2 fired=1/1 last=true seq=3 data=",
	}, fireLines(start, fs))
	st := h.c.Receivers()[0]
	assert.Equal(t, 3, st.Backlog)
	assert.Equal(t, 4, st.Parked, "tids 3..5 and tid 9's second firing wait")
	assert.True(t, a.get(1, 9).Paused, "the repeating timer is held")
	assert.Equal(t, uint64(4), h.c.Counters().Parked)

	// Waiting firings count as timers: tid 9 + 4 waiting + 3 more = 8.
	for tid := uint64(20); tid < 23; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 100})
	}
	a.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 23, After: 100})

	a.ff(3) // tw-time moves on while they wait: nothing more fires into the full outbox
	a.ping()
	require.Empty(t, a.fires())
	a.ack(1, 3)
	a.ping()
	fs = a.fires()
	assert.Equal(t, []string{
		"T+2 r=1 tid=3 fired=1/1 last=true seq=4 data=",
		"T+2 r=1 tid=4 fired=1/1 last=true seq=5 data=",
		"T+2 r=1 tid=5 fired=1/1 last=true seq=6 data=",
	}, fireLines(start, fs))
	for _, f := range fs {
		assert.Equal(t, uint64(3), f.Late, "asked for at once by the first fast-forward, then waited through the second's 3 ticks")
	}
	a.ack(1, 6)
	a.ping()
	fs = a.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, "T+2 r=1 tid=9 fired=2/0 last=false seq=7 data=", fireLine(start, fs[0]))
	tm := a.get(1, 9)
	assert.False(t, tm.Paused, "resumed when its firing went out")
	assert.Equal(t, h.c.Now()+1, tm.Due, "with its full interval from then")
	assert.Zero(t, h.c.Counters().Parked)
	assert.Zero(t, a.stats().DroppedTotal)
}

// TestOutboxWaitLate: a firing that waited for room reports how late it
// went out when tw-time moved by itself (not a fast-forward).
func TestOutboxWaitLate(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 1})
	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 1, Repeat: 1})
	h.c.Advance(start+1, 0)
	a.ping()
	require.Len(t, a.fires(), 1)
	h.c.Advance(start+11, 0)
	a.ack(1, 1)
	a.ping()
	fs := a.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, uint64(2), fs[0].Tid)
	assert.Equal(t, uint64(10), fs[0].Late)
}

// TestUserTakesHeldTimer: pausing a timer the server holds for a waiting
// firing makes the pause the user's: the server does not resume it.
func TestUserTakesHeldTimer(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 1 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1})
	a.ff(2)
	a.ping()
	require.Len(t, a.fires(), 1)
	require.True(t, a.get(1, 1).Paused)
	a.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 1}) // OK: now the user's pause
	a.ack(1, 1)
	a.ping()
	require.Len(t, a.fires(), 1, "the waiting firing goes out")
	assert.True(t, a.get(1, 1).Paused, "the timer stays paused")
}

// TestDroppedNoticeAtOnce: a receiver bound without ack whose backlog
// overflows (its session's output full) gets a dropped notice in the same
// write, one per burst, ahead of its later events.
func TestDroppedNoticeAtOnce(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklog = 2; l.MaxOutbound = 1 })
	a := h.client("a")
	a.bind(1, false)
	for tid := uint64(1); tid <= 6; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	// The outbound limit lets one event go straight out (the output was
	// empty); the rest queue, and the queue holds 2: seqs 2..4 drop.
	h.c.Advance(start+1, 0)
	ms := h.take(a.s)
	require.Len(t, ms, 2)
	assert.Equal(t, protocol.KindFire, ms[0].Kind)
	assert.Equal(t, uint64(1), ms[0].Fire.Seq)
	assert.Equal(t, protocol.Message{Kind: protocol.KindDropped, Receiver: 1, First: 2, Last: 4}, ms[1])
	var seqs []uint64
	for range 2 { // each top-up sends one: the output limit is 1 byte
		h.c.PumpAll(nil)
		for _, m := range h.take(a.s) {
			seqs = append(seqs, m.Fire.Seq)
		}
	}
	assert.Equal(t, []uint64{5, 6}, seqs)
	assert.Equal(t, uint64(3), a.stats().DroppedTotal)
}

// TestAckBindSeqNeverRepeats: a receiver in acknowledged mode that goes
// idle (all acknowledged, no timers, unbound) keeps its record, and bound
// again goes on with seqs above any it used, so a client's duplicate check
// never hides new events.
func TestAckBindSeqNeverRepeats(t *testing.T) {
	h := newHarness(t, nil)
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.ff(3)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3}, a.seqs())
	a.ack(1, 3)
	a.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: 1})
	require.Len(t, h.c.Receivers(), 1, "kept in acknowledged mode")
	require.True(t, h.c.Receivers()[0].Acked)

	v := a.bindAck(1)
	assert.Greater(t, v[2], uint64(3), "first_seq goes on past 3")
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 1})
	a.ff(1)
	a.ping()
	assert.Equal(t, []uint64{v[2]}, a.seqs())
}

// TestAckEphemeralEnds: an ephemeral bind in acknowledged mode ends with
// its session: timers, outbox and waiting firings go, counted as dropped,
// those sent as lost too.
func TestAckEphemeralEnds(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox = 2 })
	a := h.client("a")
	a.uints(protocol.Request{Op: protocol.OpBind, Receiver: 1, Ephemeral: true, Ack: true})
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 9})
	a.ff(3)
	a.ping()
	require.Len(t, a.fires(), 2)
	a.close()
	b := h.client("b")
	st := b.stats()
	assert.Equal(t, uint64(3), st.DroppedTotal, "2 in the outbox, 1 waiting")
	assert.Zero(t, st.Timers)
	assert.Equal(t, uint64(2), h.c.Counters().Lost, "the 2 sent")
	assert.Empty(t, h.c.Receivers())
}
