package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// quietTurn is one server turn: tw-time moves on, requests are applied,
// stalled sessions are topped up, the record is taken, output is written
// (the connection keeps buffered bytes), as server.endTurn does.
func quietTurn(c *Core, now *uint64, buffered int, apply func()) (rec []byte, replies bool) {
	*now += 3
	c.Advance(*now, 0)
	apply()
	c.PumpAll(func(*Session) int { return buffered })
	rec, replies = c.TakeRecord()
	rec = append([]byte(nil), rec...)
	c.Flush(func(*Session, []byte) int { return buffered }, nil)
	return rec, replies
}

// TestTrafficThatChangesNothingIsNotRecorded: requests before a hello,
// failed hellos, refused adds (over a limit, read-only, malformed data),
// reads, and the flow of their replies to a connection that keeps bytes
// buffered change nothing but the sessions' output: over thousands of
// turns they leave no record (so the server writes and fsyncs nothing),
// not even the turns' advances of tw-time. A replay of what is recorded
// afterwards (an add, which changes state) still reaches the live state.
// Before, every such request was recorded: its payload (a refused add),
// its outcome (a hello, with a reply that waited for an fsync), or its
// reply's length.
func TestTrafficThatChangesNothingIsNotRecorded(t *testing.T) {
	rc := newReplayCase(t, Limits{MaxData: 8, MaxOutbound: 1 << 20})
	c := rc.c
	c.cfg.ClientToken = "client"
	rc.cfg.ClientToken = "client"
	now := c.Now()
	var log []byte // every record, in order
	first, _ := quietTurn(c, &now, 0, func() {})
	log = append(log, first...)
	pre, failing, refused := c.Open(), c.Open(), c.Open()
	first, _ = quietTurn(c, &now, 0, func() {
		rc.apply(refused, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "r", Token: "client"})
	})
	log = append(log, first...) // the opening of the session that said hello: it learnt its id

	ping := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpPing})[4:]
	add := func(id uint64, data int) []byte {
		return protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: id, Receiver: 1, Tid: id, After: 10, Data: make([]byte, data)})[4:]
	}
	for turn := range 3000 {
		if turn == 2000 {
			c.SetReadOnly("the disk is full")
		}
		buffered := turn % 7 * 10
		if turn%100 >= 70 { // a peer that does not read: its requests wait (blocked)
			buffered = 2 << 20
		}
		rec, replies := quietTurn(c, &now, buffered, func() {
			for i := 0; i < 3 && c.MayRead(pre, buffered); i++ {
				c.Apply(pre, ping) // hello_required
			}
			if turn%500 == 0 && !failing.Killed() { // a client retrying a wrong token
				rc.apply(failing, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Token: "wrong"})
			}
			c.Apply(refused, add(uint64(turn+1), 100))                                                              // limit max_data
			rc.apply(refused, protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 1})                            // not found
			rc.apply(refused, protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: uint64(turn + 1)})          // not found
			rc.apply(refused, protocol.Request{Op: protocol.OpUnbind, Receiver: 1})                                 // not bound
			rc.apply(refused, protocol.Request{Op: protocol.OpAck, Receiver: 1, Seq: 1})                            // not bound
			rc.apply(refused, protocol.Request{Op: protocol.OpSetSpeed, Speed: 2})                                  // not an admin
			rc.apply(refused, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 1, Repeat: 1 << 40}) // invalid
		})
		require.Empty(t, rec, "turn %d: a turn that changed nothing left a record", turn)
		require.False(t, replies, "turn %d: a turn that changed nothing needs an fsync", turn)
	}
	require.True(t, failing.Killed(), "the third failed hello closes the connection")
	require.True(t, pre.Blocked(), "a peer that does not read is not read")
	c.Close(failing, 0)

	// A change after all that is recorded, and replays to the live state.
	c.SetReadOnly("")
	rec, replies := quietTurn(c, &now, 5, func() { c.Apply(refused, add(1, 4)) })
	require.NotEmpty(t, rec)
	require.True(t, replies, "an add's reply waits for its record")
	log = append(log, rec...)
	c.settle() // for the comparison: the sessions' own fields, which nothing else reads
	log = append(log, takeRecord(c)...)
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	replayed := New(rc.cfg, rc.limits, w, nil, nil)
	require.NoError(t, replayed.Replay(log))
	require.Empty(t, diffLines(dumpState(c, []uint64{1}, false), dumpState(replayed, []uint64{1}, false)))
}

// TestRefusalFloodOfABoundSessionPadsOnce: a session that is not quiet (it
// has a receiver bound) records its refused requests' replies as pads,
// since its output stream's layout matters; a flood of them in one turn
// is one pad of their sum, not one a request, and replays to the same
// state. (A red-team pass measured 24.8 MB of log in 14 s from one bound
// client's refused cancels, with a pad of a few bytes each.)
func TestRefusalFloodOfABoundSessionPadsOnce(t *testing.T) {
	rc := newReplayCase(t, Limits{})
	s := rc.session(0)
	before := len(rc.c.rec.buf)
	for tid := range 1000 {
		rc.apply(s, protocol.Request{Op: protocol.OpCancel, ID: uint64(tid + 1), Receiver: 1, Tid: uint64(1000 + tid)}) // not_found
	}
	require.LessOrEqual(t, len(rc.c.rec.buf)-before, 16, "1,000 refused cancels recorded as more than one pad")
	require.Greater(t, len(s.out), 1000*8, "the refusals were answered")
	rc.c.Flush(discardOut, nil) // the replay pads what it does not reproduce: compare the rest
	sameAfterReplay(t, rc.replay(), "a replay of the merged pad differs")
}
