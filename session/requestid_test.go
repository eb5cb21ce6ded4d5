package session

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

const testClient = 0x5eed

// frame is req's payload as a client sends it.
func frame(req protocol.Request) []byte {
	return protocol.AppendRequest(nil, &req)[protocol.HeaderSize:]
}

// rawReplies applies payload from s and returns the bytes s was sent.
func (h *harness) rawReplies(s *Session, payload []byte) []byte {
	h.apply(s, payload)
	h.flush()
	out := h.outs[s]
	delete(h.outs, s)
	return out
}

// TestRetryGetsTheFirstReply: a change with a request id that is sent
// again — on another connection, as after a failover — gets the first
// reply byte for byte and changes nothing: the add is not applied twice
// (without ids the retry is exists), a retried cancel is not not_found, a
// retried cancel_all reports the count it cancelled. The harness's replica
// replays the record and must hold the same memory.
func TestRetryGetsTheFirstReply(t *testing.T) {
	h := newHarness(t, nil)
	first, again := h.session(), h.session()
	add := frame(protocol.Request{Op: protocol.OpAdd, ID: 5, Receiver: 1, Tid: 1, After: 50, Client: testClient})
	reply := h.rawReplies(first, add)
	h.c.Close(first, 0)
	h.c.Advance(h.c.Now()+3, 100)
	assert.Equal(t, reply, h.rawReplies(again, add), "the retry's reply")
	assert.Equal(t, 1, h.c.Wheel().Len())
	in, err := h.c.Wheel().Get(wheel.Key{Receiver: 1, Tid: 1})
	require.NoError(t, err)
	assert.Equal(t, uint64(start+50), in.Due, "the first add's timer, not one added 3 ticks later")

	for _, req := range []protocol.Request{
		{Op: protocol.OpPause, ID: 6, Receiver: 1, Tid: 1, Client: testClient},
		{Op: protocol.OpResume, ID: 7, Receiver: 1, Tid: 1, Client: testClient},
		{Op: protocol.OpCancel, ID: 8, Receiver: 1, Tid: 1, Client: testClient},
	} {
		p := frame(req)
		r := h.rawReplies(again, p)
		assert.Equal(t, r, h.rawReplies(again, p), "%s retried", req.Op)
	}
	assert.Equal(t, 0, h.c.Wheel().Len())

	h.do(again, protocol.Request{Op: protocol.OpAdd, ID: 9, Receiver: 2, Tid: 1, After: 5})
	h.do(again, protocol.Request{Op: protocol.OpAdd, ID: 10, Receiver: 2, Tid: 2, After: 5})
	all := frame(protocol.Request{Op: protocol.OpCancelAll, ID: 11, Receiver: 2, Client: testClient})
	ms := h.do(again, protocol.Request{Op: protocol.OpCancelAll, ID: 11, Receiver: 2, Client: testClient})
	require.Len(t, ms, 1)
	assert.Equal(t, []uint64{2}, okUints(t, protocol.OpCancelAll, ms[0]))
	ms = h.take(again)
	require.Empty(t, ms)
	h.apply(again, all)
	ms = h.take(again)
	require.Len(t, ms, 1)
	assert.Equal(t, []uint64{2}, okUints(t, protocol.OpCancelAll, ms[0]), "the retry reports the first count, not 0")

	n, bytes := h.c.RequestIDs()
	assert.Equal(t, 5, n)
	st := h.c.Stats()
	assert.Equal(t, uint64(5), st.RequestIDs)
	assert.Equal(t, bytes, st.RequestIDBytes)
	assert.Equal(t, uint64(5*reqEntryBytes), bytes, "every reply fits in its entry")
}

// TestRetryOtherClientOrIDApplies: the memory is per client and id: the
// same id from another client, or an add without a client id, is a new
// request.
func TestRetryOtherClientOrIDApplies(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 5, Client: 1})[0])
	m := h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 5, Client: 2})[0]
	assert.Equal(t, protocol.CodeExists, m.Code, "another client's request 1")
	m = h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 5})[0]
	assert.Equal(t, protocol.CodeExists, m.Code, "no client id: no memory")
}

// TestRequestIDReused: a remembered client and id sent with another
// request is request_id_reused, and nothing is applied.
func TestRequestIDReused(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 3, Receiver: 1, Tid: 1, After: 5, Client: testClient})[0])
	m := h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 3, Receiver: 1, Tid: 2, After: 5, Client: testClient})[0]
	assert.Equal(t, protocol.CodeRequestIDReused, m.Code, m.Text)
	assert.Equal(t, uint64(3), m.ID)
	assert.Equal(t, 1, h.c.Wheel().Len(), "the second add was not applied")
	m = h.do(s, protocol.Request{Op: protocol.OpCancel, ID: 3, Receiver: 1, Tid: 1, Client: testClient})[0]
	assert.Equal(t, protocol.CodeRequestIDReused, m.Code, "another op under the same id")
	assert.Equal(t, 1, h.c.Wheel().Len())
}

// TestRefusedChangeIsNotRemembered: a change that was refused changed
// nothing and is not remembered, so its retry is judged afresh (and may
// now apply, once).
func TestRefusedChangeIsNotRemembered(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 5})
	add := protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: 1, Tid: 1, After: 9, Client: testClient}
	assert.Equal(t, protocol.CodeExists, h.do(s, add)[0].Code)
	n, _ := h.c.RequestIDs()
	assert.Zero(t, n)
	h.do(s, protocol.Request{Op: protocol.OpCancel, ID: 3, Receiver: 1, Tid: 1})
	due := okUints(t, protocol.OpAdd, h.do(s, add)[0])
	assert.Equal(t, []uint64{start + 9}, due, "the retry applies now")
	assert.Equal(t, []uint64{start + 9}, okUints(t, protocol.OpAdd, h.do(s, add)[0]), "and once")
	assert.Equal(t, 1, h.c.Wheel().Len())
}

// TestRetryPastTheWindow: past request_id_ticks, or once max_request_ids
// newer changes are remembered, a retry is a new request (as documented in
// PROTOCOL.md): the add is applied again and gets exists, the cancel
// not_found. The memory never holds more than max_request_ids.
func TestRetryPastTheWindow(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.RequestIDTicks, l.MaxRequestIDs = 10, 3 })
	s := h.session()
	add := protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 100, Client: testClient}
	okUints(t, protocol.OpAdd, h.do(s, add)[0])
	h.c.Advance(h.c.Now()+10, 100)
	okUints(t, protocol.OpAdd, h.do(s, add)[0]) // 10 ticks on: still remembered
	h.c.Advance(h.c.Now()+1, 100)
	assert.Equal(t, protocol.CodeExists, h.do(s, add)[0].Code, "11 ticks on: forgotten, applied again")

	for i := range uint64(4) {
		okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 10 + i, Receiver: 2, Tid: i, After: 100, Client: testClient})[0])
		n, bytes := h.c.RequestIDs()
		assert.LessOrEqual(t, n, 3)
		assert.Equal(t, uint64(n)*reqEntryBytes, bytes)
	}
	m := h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 10, Receiver: 2, Tid: 0, After: 100, Client: testClient})[0]
	assert.Equal(t, protocol.CodeExists, m.Code, "the oldest of 4 went past max_request_ids 3")
	okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 13, Receiver: 2, Tid: 3, After: 100, Client: testClient})[0])
}

// TestRequestIDsSurviveSnapshotAndReplay: the memory is in the snapshot:
// a Core restored from it (a restart, or a follower installing it) and
// replaying the records after it answers a retry with the first reply,
// for changes from before the snapshot and after it, and writes the same
// snapshot bytes as the live Core.
func TestRequestIDsSurviveSnapshotAndReplay(t *testing.T) {
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000}
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	live := New(cfg, Limits{}, w, nil, nil)
	live.Record(true)
	s := live.Open()
	live.Apply(s, frame(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "a", Token: testAdminToken}))
	before := frame(protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 5, Tid: 1, After: 100, Client: testClient})
	live.Apply(s, before)
	live.Flush(discardOut, nil)
	live.TakeRecord()
	snap := live.Snapshot()
	base, _ := snap.AppendNext(nil, 0)
	snap.Release()
	after := frame(protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: 5, Tid: 2, After: 100, Client: testClient})
	live.Apply(s, after)
	live.Flush(discardOut, nil)
	live.Close(s, 0) // (a session's stream is compared elsewhere)
	rec, _ := live.TakeRecord()

	restored, err := Restore(cfg, base, nil, nil)
	require.NoError(t, err)
	require.NoError(t, restored.Replay(rec))
	n, bytes := restored.RequestIDs()
	wn, wbytes := live.RequestIDs()
	assert.Equal(t, wn, n)
	assert.Equal(t, wbytes, bytes)
	a, _ := live.Snapshot().AppendNext(nil, 0)
	b, _ := restored.Snapshot().AppendNext(nil, 0)
	assert.Equal(t, a, b, "the same snapshot bytes")

	r := restored.Open()
	restored.Apply(r, frame(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "b", Token: testAdminToken}))
	for _, p := range [][]byte{before, after} {
		out := len(r.out)
		restored.Apply(r, p)
		var m protocol.Message
		payload, _, err := protocol.SplitFrame(r.out[out:], 1<<20)
		require.NoError(t, err)
		require.NoError(t, protocol.DecodeMessage(payload, &m))
		assert.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
	}
	assert.Equal(t, 2, restored.Wheel().Len())
}

// TestReplyFrame: the reply remembered for a change is its reply frame,
// even after another frame (an event) in the session's output, and none
// is found in output without one or cut short.
func TestReplyFrame(t *testing.T) {
	ev := protocol.AppendFire(nil, &protocol.Fire{Receiver: 1, Tid: 2, Tick: 3, Fired: 1, Seq: 1})
	ok := protocol.AppendOK(nil, 7, 1050)
	fail := protocol.AppendError(nil, 8, protocol.CodeNotFound, "timer not found")
	assert.Equal(t, ok, replyFrame(append(append([]byte(nil), ev...), ok...)))
	assert.Equal(t, fail, replyFrame(append(append([]byte(nil), fail...), ev...)))
	assert.Nil(t, replyFrame(ev))
	assert.Nil(t, replyFrame(ok[:len(ok)-1]))
	assert.Nil(t, replyFrame(nil))
}

// TestRequestIDsRing: the memory is a ring that wraps around and grows: with
// max_request_ids 100 and 1,000 adds, the last 100 are remembered (their
// retries get the first reply), the ones before are not, and a snapshot
// restores exactly those, in order. A reply too long for an entry is kept
// whole and counted.
func TestRequestIDsRing(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxRequestIDs = 100 })
	s := h.session()
	add := func(i uint64) protocol.Request {
		return protocol.Request{Op: protocol.OpAdd, ID: 1000 + i, Receiver: 3, Tid: i, After: 100 + i, Client: testClient}
	}
	for i := range uint64(1000) {
		okUints(t, protocol.OpAdd, h.do(s, add(i))[0])
	}
	n, bytes := h.c.RequestIDs()
	require.Equal(t, 100, n)
	assert.Equal(t, uint64(100*reqEntryBytes), bytes)
	assert.LessOrEqual(t, len(h.c.reqIDs.ring), 256, "the ring grew to hold 100, not 1,000")
	for i := uint64(900); i < 1000; i++ {
		assert.Equal(t, []uint64{start + 100 + i}, okUints(t, protocol.OpAdd, h.do(s, add(i))[0]), "retry of add %d", i)
	}
	assert.Equal(t, protocol.CodeExists, h.do(s, add(899))[0].Code, "forgotten: applied again")

	snap := h.c.Snapshot()
	data, _ := snap.AppendNext(nil, 0)
	snap.Release()
	r, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)
	var a, b []string
	for p := h.c.reqIDs.first; p < h.c.reqIDs.next; p++ {
		if e := h.c.reqIDs.at(p); !e.dead {
			a = append(a, fmt.Sprintf("%v %d %x %x", e.key, e.tick, e.sum, h.c.reqIDs.reply(e)))
		}
	}
	for p := r.reqIDs.first; p < r.reqIDs.next; p++ {
		e := r.reqIDs.at(p)
		b = append(b, fmt.Sprintf("%v %d %x %x", e.key, e.tick, e.sum, r.reqIDs.reply(e)))
	}
	assert.Equal(t, a, b)

	var m requestIDs
	e := m.push(reqKey{1, 2})
	long := make([]byte, 100)
	m.setReply(e, long)
	assert.Equal(t, long, m.reply(e))
	assert.Equal(t, uint64(reqEntryBytes+100), m.size(e))
	m.drop(0)
	assert.Empty(t, m.big, "a dropped entry's long reply is forgotten")
	e = m.push(reqKey{1, 3})
	m.setReply(e, []byte{1, 2, 3})
	assert.Equal(t, []byte{1, 2, 3}, m.reply(e))
	assert.Equal(t, uint64(reqEntryBytes), m.size(e))
}

// TestRequestIDsOff: with max_request_ids -1 nothing is remembered: a
// change sent again with the same client and id applies again (the add
// gets exists, the cancel not_found), as docs/PROTOCOL.md says of a server
// that reports no request_id_ticks. Turning it off on a Core that
// remembers (SetLimits, as a config reload does; recorded, so the replica
// forgets at the same point) forgets at once, and a lower max_request_ids
// forgets the oldest at once.
func TestRequestIDsOff(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxRequestIDs = -1 })
	s := h.session()
	add := protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 50, Client: testClient}
	okUints(t, protocol.OpAdd, h.do(s, add)[0])
	assert.Equal(t, protocol.CodeExists, h.do(s, add)[0].Code, "applied again")
	cancel := protocol.Request{Op: protocol.OpCancel, ID: 2, Receiver: 1, Tid: 1, Client: testClient}
	assert.Equal(t, protocol.KindOK, h.do(s, cancel)[0].Kind)
	assert.Equal(t, protocol.CodeNotFound, h.do(s, cancel)[0].Code, "applied again")
	n, bytes := h.c.RequestIDs()
	assert.Zero(t, n)
	assert.Zero(t, bytes)
	assert.Zero(t, h.c.Stats().RequestIDs)

	h = newHarness(t, nil)
	s = h.session()
	for i := range uint64(3) {
		okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 10 + i, Receiver: 2, Tid: i, After: 50, Client: testClient})[0])
	}
	retry := func(i uint64) protocol.Message {
		return h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 10 + i, Receiver: 2, Tid: i, After: 50, Client: testClient})[0]
	}
	l := h.c.Limits()
	l.MaxRequestIDs = 2
	h.c.SetLimits(l)
	n, _ = h.c.RequestIDs()
	assert.Equal(t, 2, n, "the oldest forgotten when the limit went down")
	assert.Equal(t, protocol.CodeExists, retry(0).Code)
	okUints(t, protocol.OpAdd, retry(2))

	l.MaxRequestIDs = -1
	h.c.SetLimits(l)
	n, bytes = h.c.RequestIDs()
	assert.Zero(t, n)
	assert.Zero(t, bytes)
	assert.Nil(t, h.c.reqIDs.ring, "the memory is given back")
	assert.Equal(t, protocol.CodeExists, retry(2).Code, "forgotten: applied again")

	l.MaxRequestIDs = 0 // the default again
	h.c.SetLimits(l)
	okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 20, Receiver: 3, Tid: 1, After: 50, Client: testClient})[0])
	okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 20, Receiver: 3, Tid: 1, After: 50, Client: testClient})[0])
}

// TestSnapshotCopiesRequestIDs: Snapshot copies the memory of request ids
// and AppendNext encodes the copy off the loop, so changes remembered and
// forgotten after Snapshot (here enough to wrap the ring around and push
// out every entry it held) do not reach the snapshot: it restores to the state
// of a snapshot encoded at once (the core section byte for byte).
func TestSnapshotCopiesRequestIDs(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxRequestIDs = 50 })
	s := h.session()
	add := func(i uint64) {
		okUints(t, protocol.OpAdd, h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 100 + i, Receiver: 4, Tid: i, After: 500, Client: testClient})[0])
	}
	for i := range uint64(60) {
		add(i)
	}
	h.flush()
	now := h.c.Snapshot()
	want, _ := now.AppendNext(nil, 0)
	now.Release()
	snap := h.c.Snapshot()
	for i := uint64(60); i < 200; i++ {
		add(i)
	}
	got, _ := snap.AppendNext(nil, 0)
	snap.Release()
	requireSameState(t, h.c.cfg, want, got, "the snapshot taken before the changes")
	r, err := Restore(h.c.cfg, got, nil, nil)
	require.NoError(t, err)
	n, _ := r.RequestIDs()
	assert.Equal(t, 50, n)
}

// TestRetryIDsFarApart: a client whose ids are far apart (2^40 each from
// the last, and the largest uint64) cannot have them in a window: they
// are remembered in the hash index, beside another client's consecutive
// ids in its window. A retry of each, on another connection and after a
// snapshot and restore, gets its first reply and adds nothing; an id
// between them, never sent, is a new request. The harness's replica and
// state digest must agree too (replayCheck).
func TestRetryIDsFarApart(t *testing.T) {
	h := newHarness(t, nil)
	first := h.session()
	var adds, replies [][]byte
	add := func(client, id uint64) {
		p := frame(protocol.Request{Op: protocol.OpAdd, ID: id, Receiver: client, Tid: uint64(len(adds)), After: 50, Client: client})
		adds, replies = append(adds, p), append(replies, h.rawReplies(first, p))
	}
	for i := range uint64(6) {
		add(testClient, (i+1)<<40)
		add(testClient+1, i+1)
	}
	add(testClient, ^uint64(0))
	r := &h.c.reqIDs
	require.Equal(t, 13, r.live)
	require.Equal(t, 6, r.hashed, "the far ids but the first (a new window takes any id) are in the hash index")
	checkRequestIndex(t, r)

	h.c.Close(first, 0)
	again := h.session()
	for i, p := range adds {
		assert.Equal(t, replies[i], h.rawReplies(again, p), "retry %d", i)
	}
	assert.Equal(t, 13, h.c.Wheel().Len(), "nothing added twice")
	ms := h.do(again, protocol.Request{Op: protocol.OpAdd, ID: 3 << 39, Receiver: 7, Tid: 1, After: 50, Client: testClient})
	require.Len(t, ms, 1)
	assert.Equal(t, protocol.KindOK, ms[0].Kind, "an id between the far ones is new")

	snap := h.c.Snapshot()
	b, _ := snap.AppendNext(nil, 0)
	snap.Release()
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000, ServerVersion: "test"}
	restored, err := Restore(cfg, b, testLogger(), nil)
	require.NoError(t, err)
	checkRequestIndex(t, &restored.reqIDs)
	s := restored.Open()
	restored.Apply(s, frame(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "r", Token: testAdminToken}))
	for i, p := range adds {
		at := len(s.out)
		restored.Apply(s, p)
		assert.Equal(t, replies[i], s.out[at:], "retry %d after a restore", i)
	}
	assert.Equal(t, 14, restored.Wheel().Len())
}

// TestRetryIDsWrapAround: a client whose ids pass the largest uint64 and
// start again from 0 (a counter started at a random 64-bit value) gets
// its retries answered from memory on both sides of the wrap. Before, the
// id after the wrap went into the window of the ids just below 2^64, at
// a place outside its range, where no lookup found it: its retry was
// applied again (exists, for an add), and a Core restored from a
// snapshot answered it from memory: two replicas disagreed.
func TestRetryIDsWrapAround(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	var adds, replies [][]byte
	for i, id := range []uint64{^uint64(0) - 2, ^uint64(0) - 1, 3, 4} {
		p := frame(protocol.Request{Op: protocol.OpAdd, ID: id, Receiver: 1, Tid: uint64(i), After: 50, Client: testClient})
		adds, replies = append(adds, p), append(replies, h.rawReplies(s, p))
	}
	checkRequestIndex(t, &h.c.reqIDs)
	for i, p := range adds {
		assert.Equal(t, replies[i], h.rawReplies(s, p), "retry %d", i)
	}
	assert.Equal(t, 4, h.c.Wheel().Len())
}
