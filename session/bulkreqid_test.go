package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// chunkedCancelAll returns a harness whose bulk operations take 2 timers
// a turn, with 5 timers of receiver 1, and the payload of a cancel_all of
// them with request id 11 of testClient (three turns to complete).
func chunkedCancelAll(t *testing.T) (*harness, []byte) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 2 })
	s := h.session()
	for tid := range uint64(5) {
		okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1 + tid, Receiver: 1, Tid: tid, After: 1000})[0])
	}
	h.c.Close(s, 0)
	return h, frame(protocol.Request{Op: protocol.OpCancelAll, ID: 11, Receiver: 1, Client: testClient})
}

// replyBytes flushes and returns (and forgets) what s was sent.
func (h *harness) replyBytes(s *Session) []byte {
	h.flush()
	out := h.outs[s]
	delete(h.outs, s)
	return out
}

// TestBulkRetryAfterCompletion: a cancel_all that replies in a later turn
// (chunked by max_bulk_per_turn) is remembered like any other change: its
// retry on another connection once it completed gets the first reply byte
// for byte, [5], and cancels nothing (not the timer added since).
func TestBulkRetryAfterCompletion(t *testing.T) {
	h, all := chunkedCancelAll(t)
	first, again := h.session(), h.session()
	h.apply(first, all)
	require.Empty(t, h.replyBytes(first), "the reply waits for the last chunk")
	n, _ := h.c.RequestIDs()
	assert.Equal(t, 1, n, "remembered as pending")
	h.catchUp()
	reply := h.replyBytes(first)
	require.NotEmpty(t, reply)
	h.c.Close(first, 0)
	okUints(t, protocol.OpAdd, h.do(again, protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 9, After: 1000})[0])

	assert.Equal(t, reply, h.rawReplies(again, all), "the retry's reply is the first one")
	var msg protocol.Message
	payload, _, err := protocol.SplitFrame(reply, 1<<20)
	require.NoError(t, err)
	require.NoError(t, protocol.DecodeMessage(payload, &msg))
	assert.Equal(t, []uint64{5}, okUints(t, protocol.OpCancelAll, msg))
	_, err = h.c.Wheel().Get(wheel.Key{Receiver: 1, Tid: 9})
	assert.NoError(t, err, "the timer added after the first cancel_all is not cancelled by its retry")
	assert.False(t, again.Waiting())
}

// TestBulkRetryAdoptsAfterClose: a retry of a cancel_all still in
// progress whose connection closed (a lost connection, a failover) is not
// applied again: the retrying session takes the operation over and gets
// its reply, [5] with the retry's frame id, when it completes. A snapshot
// taken while it is pending holds it: the restored Core does the same.
// Once complete, a further retry gets the same bytes.
func TestBulkRetryAdoptsAfterClose(t *testing.T) {
	h, all := chunkedCancelAll(t)
	first, again, third := h.session(), h.session(), h.session()
	h.apply(first, all)
	h.c.Close(first, 0)
	require.Equal(t, 1, h.c.BulkInProgress())

	snap := h.c.Snapshot()
	data, _ := snap.AppendNext(nil, 0)
	snap.Release()
	r, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)
	again2 := r.Open()
	r.Apply(again2, frame(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "r", Token: testAdminToken}))
	r.Flush(discardOut, nil)
	again2.out = again2.out[:0]

	h.apply(again, all)
	r.Apply(again2, all)
	require.Empty(t, h.take(again), "the retry waits for the operation")
	assert.True(t, again.Waiting())
	assert.Empty(t, again2.out)
	h.catchUp()
	for i := 0; i < 10 && r.BulkInProgress() > 0; i++ {
		r.Advance(r.Now(), 0)
	}
	reply := h.replyBytes(again)
	assert.Equal(t, reply, again2.out, "the restored Core answers the adopting session alike")
	var m protocol.Message
	payload, _, err := protocol.SplitFrame(reply, 1<<20)
	require.NoError(t, err)
	require.NoError(t, protocol.DecodeMessage(payload, &m))
	assert.Equal(t, uint64(11), m.ID)
	assert.Equal(t, []uint64{5}, okUints(t, protocol.OpCancelAll, m), "the first operation's count, not a second one's 0")
	assert.False(t, again.Waiting())
	assert.Zero(t, h.c.BulkInProgress())
	assert.Zero(t, h.c.Wheel().Len())

	assert.Equal(t, reply, h.rawReplies(third, all), "a retry after completion")
}

// TestBulkRetryWhileFirstOpen: a retry of a cancel_all in progress while
// its first connection is open is answered bad_state and changes nothing;
// the first connection gets the reply, and a retry after completion gets
// it too.
func TestBulkRetryWhileFirstOpen(t *testing.T) {
	h, all := chunkedCancelAll(t)
	first, again := h.session(), h.session()
	h.apply(first, all)
	h.apply(again, all)
	ms := h.take(again)
	require.Len(t, ms, 1)
	assert.Equal(t, protocol.KindError, ms[0].Kind)
	assert.Equal(t, protocol.CodeBadState, ms[0].Code)
	assert.Contains(t, ms[0].Text, "still in progress on another connection")
	assert.False(t, again.Waiting())
	assert.Equal(t, 1, h.c.BulkInProgress(), "no second operation")
	h.catchUp()
	reply := h.replyBytes(first)
	require.NotEmpty(t, reply)
	assert.Equal(t, reply, h.rawReplies(again, all))
	var m protocol.Message
	payload, _, err := protocol.SplitFrame(reply, 1<<20)
	require.NoError(t, err)
	require.NoError(t, protocol.DecodeMessage(payload, &m))
	assert.Equal(t, []uint64{5}, okUints(t, protocol.OpCancelAll, m))
}

// TestBulkRetryAdoptsAfterRestart: after a restart (or a failover, whose
// new leader's Core closes every session the same way) the operation goes
// on unanswered until a retry on a new connection takes it over.
func TestBulkRetryAdoptsAfterRestart(t *testing.T) {
	h, all := chunkedCancelAll(t)
	first := h.session()
	h.apply(first, all)
	h.c.Restart()
	h.flush()
	again := h.session()
	h.apply(again, all)
	require.Empty(t, h.take(again))
	h.catchUp()
	ms := h.take(again)
	require.Len(t, ms, 1)
	assert.Equal(t, []uint64{5}, okUints(t, protocol.OpCancelAll, ms[0]))
}

// TestBulkPendingForgotten: a pending entry that goes past the window
// before its operation completes is forgotten and its operation unlinked:
// a retry then is a new request (a second operation, answered 0), and
// the memory holds that second application's reply, not the first
// operation's count, which completes unremembered.
func TestBulkPendingForgotten(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn, l.RequestIDTicks = 1, 2 })
	s := h.session()
	for tid := range uint64(6) {
		okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1 + tid, Receiver: 1, Tid: tid, After: 1000})[0])
	}
	all := frame(protocol.Request{Op: protocol.OpCancelAll, ID: 11, Receiver: 1, Client: testClient})
	first, again, third := h.session(), h.session(), h.session()
	h.apply(first, all)
	h.c.Close(first, 0)
	h.c.Advance(h.c.Now()+5, 100) // one more chunk; the entry is 5 ticks old
	h.apply(again, all)
	require.Equal(t, 2, h.c.BulkInProgress(), "past the window: applied again")
	h.catchUp()
	reply := h.replyBytes(again)
	var m protocol.Message
	payload, _, err := protocol.SplitFrame(reply, 1<<20)
	require.NoError(t, err)
	require.NoError(t, protocol.DecodeMessage(payload, &m))
	assert.Equal(t, []uint64{0}, okUints(t, protocol.OpCancelAll, m), "the first operation covered them all")
	assert.Equal(t, reply, h.rawReplies(third, all), "the memory holds the second application's reply")
}

// TestBulkSnapshotVersion11: a format 11 snapshot, whose bulk operations
// carry no client id, is still read, and its operation completes.
func TestBulkSnapshotVersion11(t *testing.T) {
	h, _ := chunkedCancelAll(t)
	s := h.session()
	h.send(s, protocol.Request{Op: protocol.OpCancelAll, ID: 11, Receiver: 1})
	require.Equal(t, 1, h.c.BulkInProgress())
	snap := h.c.Snapshot()
	v12, _ := snap.AppendNext(nil, 0)
	snap.Release()
	var core encoder
	h.c.appendCore(&core)
	require.Equal(t, core.b, v12[:len(core.b)])
	// The core section ends with the operation's client id (0) and the
	// memory of request ids (0 entries); format 11 has no client id.
	require.Equal(t, []byte{0, 0}, core.b[len(core.b)-2:])
	v11 := append([]byte(snapMagic), 11)
	v11 = append(v11, core.b[len(snapMagic)+1:len(core.b)-2]...)
	v11 = append(v11, 0)
	v11 = append(v11, v12[len(core.b):]...)
	r, err := Restore(h.c.cfg, v11, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 1, r.BulkInProgress())
	for i := 0; i < 10 && r.BulkInProgress() > 0; i++ {
		r.Advance(r.Now(), 0)
	}
	assert.Zero(t, r.BulkInProgress())
	assert.Zero(t, r.Wheel().Len())
	snap = r.Snapshot()
	again, _ := snap.AppendNext(nil, 0)
	snap.Release()
	assert.Equal(t, byte(snapVersion), again[len(snapMagic)])
}

// TestBulkRetryPauseAllCancelGroup: pause_all and cancel_group with a
// request id, chunked (max_bulk_per_turn 2, 5 timers), are remembered
// like cancel_all: a retry on another connection once each completed gets
// the first reply byte for byte, [5], and changes nothing: the timer
// resumed since stays running, the one added to the group since stays.
func TestBulkRetryPauseAllCancelGroup(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 2 })
	s := h.session()
	for tid := range uint64(5) {
		okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1 + tid, Receiver: 1, Tid: tid, After: 1000, Group: 77})[0])
	}
	first, again := h.session(), h.session()
	decode := func(reply []byte) protocol.Message {
		t.Helper()
		var m protocol.Message
		payload, _, err := protocol.SplitFrame(reply, 1<<20)
		require.NoError(t, err)
		require.NoError(t, protocol.DecodeMessage(payload, &m))
		return m
	}
	paused := func(tid uint64) bool {
		t.Helper()
		info, err := h.c.Wheel().Get(wheel.Key{Receiver: 1, Tid: tid})
		require.NoError(t, err)
		return info.Paused
	}

	pause := frame(protocol.Request{Op: protocol.OpPauseAll, ID: 21, Receiver: 1, Client: testClient})
	h.apply(first, pause)
	require.Empty(t, h.replyBytes(first), "the reply waits for the last chunk")
	h.catchUp()
	reply := h.replyBytes(first)
	require.NotEmpty(t, reply)
	assert.Equal(t, []uint64{5}, okUints(t, protocol.OpPauseAll, decode(reply)))
	okUints(t, protocol.OpResume, h.do(s, protocol.Request{Op: protocol.OpResume, ID: 6, Receiver: 1, Tid: 3})[0])
	h.c.Close(first, 0)
	assert.Equal(t, reply, h.rawReplies(again, pause), "the retry's reply is the first one")
	h.catchUp()
	assert.Zero(t, h.c.BulkInProgress())
	for tid := range uint64(5) {
		assert.Equal(t, tid != 3, paused(tid), "tid %d: the retry paused nothing (3 was resumed since)", tid)
	}

	cancel := frame(protocol.Request{Op: protocol.OpCancelGroup, ID: 22, Group: 77, Client: testClient})
	third := h.session()
	h.apply(again, cancel)
	require.Empty(t, h.replyBytes(again), "the reply waits for the last chunk")
	h.catchUp()
	reply = h.replyBytes(again)
	assert.Equal(t, []uint64{5}, okUints(t, protocol.OpCancelGroup, decode(reply)))
	h.c.Close(again, 0)
	okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 9, Receiver: 1, Tid: 9, After: 1000, Group: 77})[0])
	assert.Equal(t, reply, h.rawReplies(third, cancel), "the retry's reply is the first one")
	h.catchUp()
	_, err := h.c.Wheel().Get(wheel.Key{Receiver: 1, Tid: 9})
	assert.NoError(t, err, "the timer added to the group after the first cancel_group is not cancelled by its retry")
	assert.Equal(t, 1, h.c.Wheel().Len())
}
