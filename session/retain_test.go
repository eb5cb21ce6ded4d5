package session

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// unbind releases receiver.
func (c *client) unbind(receiver uint64) {
	c.t.Helper()
	c.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: receiver})
}

// TestIdleAckReceiverRetention: an idle receiver in acknowledged mode is
// kept for ack_retention_ticks, then forgotten; bound again with ack, it
// goes on with seqs past any it gave before it was forgotten.
func TestIdleAckReceiverRetention(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.AckRetentionTicks = 100 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.ff(3)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3}, a.seqs())
	a.ack(1, 3)
	a.unbind(1)
	require.Len(t, h.c.Receivers(), 1, "retained")
	assert.Equal(t, 1, h.c.RetainedReceivers())

	a.ff(99)
	require.Len(t, h.c.Receivers(), 1, "retained for 100 ticks")
	a.ff(1)
	assert.Empty(t, h.c.Receivers(), "forgotten 100 ticks after it became idle")
	assert.Zero(t, h.c.RetainedReceivers())
	assert.Zero(t, h.c.ReceiverBytes())

	v := a.bindAck(1)
	assert.Greater(t, v[2], uint64(3), "first_seq goes on past 3")
}

// TestRetentionRestartsWhenBusy: a retained receiver bound again (or given
// timers) is not forgotten while busy, and its retention counts from when
// it last became idle.
func TestRetentionRestartsWhenBusy(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.AckRetentionTicks = 100 })
	a := h.client("a")
	a.bindAck(1)
	a.unbind(1)
	a.ff(60)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 500}) // busy while unbound: its timer keeps it
	a.ff(60)
	require.Len(t, h.c.Receivers(), 1, "a receiver with a timer is kept")
	a.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 1}) // idle again now
	a.ff(99)
	require.Len(t, h.c.Receivers(), 1, "retention counts from the cancel")
	a.ff(1)
	assert.Empty(t, h.c.Receivers())
}

// TestMaxReceiversEvictsIdle: past max_receivers, a bind that needs a new
// record forgets the longest-idle retained receiver; when every record is
// in use it fails with limit_exceeded.
func TestMaxReceiversEvictsIdle(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxReceivers = 3 })
	a := h.client("a")
	for id := uint64(1); id <= 3; id++ {
		a.bindAck(id)
		a.unbind(id)
		a.ff(1)
	}
	a.bindAck(4) // forgets 1, the longest idle
	ids := func() []uint64 {
		var out []uint64
		for _, r := range h.c.Receivers() {
			out = append(out, r.ID)
		}
		return out
	}
	assert.Equal(t, []uint64{2, 3, 4}, ids())
	a.bindAck(5)
	a.bindAck(6)
	assert.Equal(t, []uint64{4, 5, 6}, ids())
	msg := a.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpBind, Receiver: 7, Ack: true})
	assert.Contains(t, msg, "max_receivers")
	a.bindAck(6) // a receiver with a record binds whatever the count
	assert.Equal(t, uint64(3), a.stats().Receivers)
}

// TestAckBindFloodBounded: one client binding and unbinding receivers in
// acknowledged mode without end keeps at most max_receivers records, and
// none once the retention passes (it used to keep every one for ever).
func TestAckBindFloodBounded(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxReceivers, l.AckRetentionTicks = 1000, 50 })
	a := h.client("a")
	for id := uint64(1); id <= 5000; id++ {
		a.bindAck(id)
		a.unbind(id)
		require.LessOrEqual(t, len(h.c.receivers), 1000)
	}
	assert.Equal(t, 1000, len(h.c.receivers))
	st := a.stats()
	assert.Equal(t, uint64(1000*receiverRecordBytes), st.ReceiverBytes, "stats shows the records' memory")
	assert.Equal(t, uint64(1000), st.RetainedReceivers)
	assert.Equal(t, 1000, h.c.Counters().RetainedReceivers, "and so do the metrics")
	a.ff(50)
	assert.Empty(t, h.c.receivers, "all forgotten after the retention")
}

// TestRetainedSurvivesSnapshot: the retained list and each receiver's idle
// tick are in the snapshot: a restored Core forgets them at the same tick.
func TestRetainedSurvivesSnapshot(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.AckRetentionTicks = 100 })
	a := h.client("a")
	a.bindAck(2)
	a.unbind(2)
	a.ff(30)
	a.bindAck(1)
	a.unbind(1)
	a.ff(10)
	h.flush()
	c2 := restoreCopy(t, h.c)
	require.Equal(t, 2, c2.RetainedReceivers())
	c2.Advance(h.c.target+60, 0)
	assert.Equal(t, []ReceiverState{{ID: 1, Acked: true, Seq: 0}}, c2.Receivers(), "2 idle since 100 ticks, 1 since 70")
	c2.Advance(h.c.target+90, 0)
	assert.Empty(t, c2.Receivers())
}

// TestRetainLegacySnapshot: a Core restored from a snapshot before version
// 5 (which kept idle receivers in acknowledged mode for ever) retains them
// from the snapshot's tw-time, and forgets them after the retention.
func TestRetainLegacySnapshot(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.AckRetentionTicks = 100 })
	a := h.client("a")
	a.bindAck(1)
	a.unbind(1)
	h.flush()
	h.c.unlinkIdle(h.c.receivers[1]) // as a version 4 Core held it
	e := encoder{}
	h.c.appendCore(&e)
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0}, e.b[len(e.b)-6:], "the core section ends with an empty retained list, forgotSeq 0 (version 8), no groups, paused receivers or bulk operations (version 10) and no request ids (version 11)")
	snap := h.c.Snapshot()
	data, _ := snap.AppendNext(nil, 0)
	snap.Release()
	// Then the receivers' count and receiver 1, whose backlog's chunk
	// layout (version 7: none, two zero bytes after queuedIn) v4 lacks.
	r, pre := h.c.receivers[1], encoder{}
	pre.uv(r.id)
	pre.uv(sid(r.owner))
	pre.bool(r.ephemeral)
	pre.uv(r.seq)
	pre.uv(r.dropped)
	pre.uv(sid(r.queuedIn))
	at := len(e.b) + 1 + len(pre.b)
	require.Equal(t, []byte{0, 0}, data[at:at+2])
	v4 := append(append(append([]byte(nil), data[:len(e.b)-6]...), data[len(e.b):at]...), data[at+2:]...)
	v4[len(snapMagic)] = 4
	c2, err := Restore(h.c.cfg, v4, testLogger(), nil)
	require.NoError(t, err)
	require.Equal(t, 1, c2.RetainedReceivers())
	c2.Advance(c2.target+99, 0)
	require.Len(t, c2.Receivers(), 1)
	c2.Advance(c2.target+1, 0)
	assert.Empty(t, c2.Receivers())
	h.c.retain(h.c.receivers[1]) // (for the harness's replay check)
}

// restoreCopy restores a copy of c from its snapshot.
func restoreCopy(t *testing.T, c *Core) *Core {
	t.Helper()
	snap := c.Snapshot()
	data, _ := snap.AppendNext(nil, 0)
	snap.Release()
	c2, err := Restore(c.cfg, data, testLogger(), nil)
	require.NoError(t, err)
	return c2
}

// BenchmarkRetainedReceiverMemory reports the heap a retained idle
// receiver in acknowledged mode takes (bind with ack, unbind), with the
// copy of it a finished snapshot leaves for the next, to check
// receiverRecordBytes, the estimate stats and metrics report.
func BenchmarkRetainedReceiverMemory(b *testing.B) {
	const n = 100_000
	for range b.N {
		h := newHarness(b, nil)
		a := h.client("a")
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for id := uint64(1); id <= n; id++ {
			a.send(protocol.Request{Op: protocol.OpBind, Receiver: id, Ack: true})
			a.send(protocol.Request{Op: protocol.OpUnbind, Receiver: id})
			if id%1000 == 0 {
				h.take(a.s)
			}
		}
		snapBytes(h.c)
		runtime.GC()
		runtime.ReadMemStats(&after)
		require.Equal(b, n, h.c.RetainedReceivers())
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/record")
		b.ReportMetric(float64(receiverRecordBytes), "estB/record")
	}
}

// TestRetentionExpiryAcrossQuietAdvances: more idle receivers than one
// Advance forgets (maxExpirePerAdvance) expire over advances that fire
// nothing. Such advances are recorded lazily, as one advance to the last
// target; that advance must forget what the live ones did, or a replay
// (a restart, a cluster follower) keeps records the live server forgot
// (timers added for them then fire in acknowledged mode there, in plain
// mode here).
func TestRetentionExpiryAcrossQuietAdvances(t *testing.T) {
	const n = maxExpirePerAdvance + 100
	h := newHarness(t, func(_ *Config, l *Limits) { l.AckRetentionTicks = 10 })
	a := h.client("a")
	for id := uint64(1); id <= n; id++ {
		a.bindAck(id)
		a.unbind(id)
	}
	require.Equal(t, n, h.c.RetainedReceivers())
	for range 12 { // quiet advances, one tick each: nothing is due
		h.c.Advance(h.c.Now()+1, 0)
	}
	require.Zero(t, h.c.RetainedReceivers(), "all forgotten, over two advances")
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 5}) // a recorded input after them
	h.replayCheck()
}

// TestForgottenAckReceiverQueuedSeqsGoOn: a receiver in acknowledged mode
// forgotten after ack_retention_ticks gets timers fired in plain mode while
// unbound (a fresh record, numbered from 1 again); bound with ack again,
// the events it is handed must not reuse the seqs the client acknowledged
// before it was forgotten, or the client's duplicate check drops them as
// already seen (PROTOCOL "Acknowledged delivery": a client never takes a
// new event for one it has seen).
func TestForgottenAckReceiverQueuedSeqsGoOn(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.AckRetentionTicks = 100 })
	a := h.client("a")
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Repeat: 3})
	a.ff(3)
	a.ping()
	require.Equal(t, []uint64{1, 2, 3}, a.seqs())
	a.ack(1, 3)
	a.unbind(1)
	a.ff(100)
	require.Empty(t, h.c.Receivers(), "forgotten")

	a.add(protocol.Request{Receiver: 1, Tid: 2, After: 1, Repeat: 2}) // fires while unbound, plain mode
	a.ff(2)
	h.flush()
	c2 := restoreCopy(t, h.c) // a restart from a snapshot remembers it too
	assert.Equal(t, uint64(3), c2.forgotSeq)
	v := a.bindAck(1)
	require.Equal(t, uint64(2), v[0], "both events are queued")
	a.ping()
	got := a.seqs()
	require.Len(t, got, 2)
	assert.Greater(t, got[0], uint64(3), "the first event after the bind is new to the client: seq past 3")
	assert.Equal(t, got[0], v[2], "first_seq names it")
	assert.Equal(t, got[0]+1, got[1])
	a.ack(1, got[1])
	a.add(protocol.Request{Receiver: 1, Tid: 3, After: 1})
	a.ff(1)
	a.ping()
	assert.Equal(t, []uint64{got[1] + 1}, a.seqs(), "later events go on from there")
}
