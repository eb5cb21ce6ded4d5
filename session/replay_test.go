package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// The tests here replay a whole record into a fresh Core with the public
// Replay (the replica replays input by input) and compare the states. Each
// covers an input the server makes in one turn and the log must reproduce
// after a restart.

// replayCase is a live Core recording from its start, and the config it
// was made with.
type replayCase struct {
	t      *testing.T
	c      *Core
	cfg    Config
	limits Limits
}

func newReplayCase(t *testing.T, limits Limits) *replayCase {
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000}
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	rc := &replayCase{t: t, c: New(cfg, limits, w, nil, nil), cfg: cfg, limits: limits}
	rc.c.Record(true)
	return rc
}

// session opens a session that says hello and binds receiver 1, with a
// timer firing on it every tick carrying data bytes.
func (rc *replayCase) session(data int) *Session {
	s := rc.c.Open()
	rc.apply(s, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "r", Token: testAdminToken})
	rc.apply(s, protocol.Request{Op: protocol.OpBind, Receiver: 1})
	rc.apply(s, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 1, Data: make([]byte, data)})
	rc.c.Flush(discardOut, nil)
	return s
}

func (rc *replayCase) apply(s *Session, req protocol.Request) {
	rc.c.Apply(s, protocol.AppendRequest(nil, &req)[4:])
}

// replay replays everything recorded into a fresh Core and returns the
// first difference of state, or the replay's error, or "".
func (rc *replayCase) replay() string {
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(rc.t, err)
	c := New(rc.cfg, rc.limits, w, nil, nil)
	rc.c.settle() // what the record holds back (quiet.go)
	if err := c.Replay(takeRecord(rc.c)); err != nil {
		return err.Error()
	}
	ids := []uint64{1}
	return diffLines(dumpState(rc.c, ids, false), dumpState(c, ids, false))
}

// sameAfterReplay fails t with why when diff shows the replay differs.
func sameAfterReplay(t *testing.T, diff, why string) {
	t.Helper()
	if diff != "" {
		t.Fatalf("%s:\n%s", why, diff)
	}
}

// TestReplayReadReplies: replies to requests that change nothing (reads,
// refused and unknown requests, failed hellos) and the error replies of
// Malformed and Expire lay out a session's output stream as the live run
// did.
func TestReplayReadReplies(t *testing.T) {
	rc := newReplayCase(t, Limits{})
	s := rc.session(0)
	other := rc.c.Open()
	for _, req := range []protocol.Request{{Op: protocol.OpPing}, {Op: protocol.OpGet, Receiver: 1, Tid: 1},
		{Op: protocol.OpList, Receiver: 1}, {Op: protocol.OpStats}, {Op: 99}, {Op: protocol.OpSetSpeed, Speed: -1},
		{Op: protocol.OpHello, Version: 99}} {
		rc.apply(s, req)
		rc.apply(other, req)
	}
	rc.c.Advance(start+1, 0)
	rc.c.Flush(discardOut, nil)
	rc.c.Malformed(s, 0, errShort)
	rc.c.Expire(other, "idle")
	rc.c.Flush(discardOut, nil)
	require.Empty(t, rc.replay())
}

// TestReplayCloseInsideWrite: a write to a peer that has reset the
// connection closes the session inside Flush's writer; the events of that
// write never reached the socket and are lost, in the replay too.
func TestReplayCloseInsideWrite(t *testing.T) {
	rc := newReplayCase(t, Limits{})
	s := rc.session(0)
	rc.c.Advance(start+1, 0)
	rc.c.Flush(func(s *Session, out []byte) int {
		rc.c.Close(s, 0) // the peer reset: nothing of out is sent
		return 0
	}, nil)
	require.Equal(t, uint64(1), rc.c.Counters().Lost)
	require.True(t, s.Closed())
	sameAfterReplay(t, rc.replay(), "a close inside a write: the batch being written counts as unsent")
}

// TestReplayWriteLeftBuffered: a write the connection keeps buffered (a
// peer that does not read) leaves its events in flight; closing the
// connection then loses them, in the replay too.
func TestReplayWriteLeftBuffered(t *testing.T) {
	rc := newReplayCase(t, Limits{})
	s := rc.session(0)
	rc.c.Advance(start+1, 0)
	buffered := 0
	rc.c.Flush(func(_ *Session, out []byte) int { buffered += len(out); return buffered }, nil)
	rc.c.Close(s, buffered)
	require.Equal(t, uint64(1), rc.c.Counters().Lost)
	sameAfterReplay(t, rc.replay(), "a write the connection left buffered: its events stay in flight")
}

// TestReplayPumpAll: PumpAll tops a stalled session up from its backlog as
// its connection drains; the replay lays out the same output.
func TestReplayPumpAll(t *testing.T) {
	rc := newReplayCase(t, Limits{MaxOutbound: 200})
	s := rc.session(100)
	rc.c.Advance(start+3, 0) // 3 events of ~130 bytes: the 2nd and 3rd are held back
	rc.c.Flush(func(_ *Session, out []byte) int { return len(out) }, nil)
	require.True(t, rc.c.PumpAll(func(*Session) int { return 0 }), "the drained connection takes the held events")
	rc.c.Flush(discardOut, nil)
	require.NotZero(t, s.written)
	sameAfterReplay(t, rc.replay(), "the end-of-turn top-up moves the same events")
}

// TestReplayMayReadBlock: MayRead blocks a session whose output is at
// max_outbound and puts it on the stalled list; the replay has it so too.
func TestReplayMayReadBlock(t *testing.T) {
	rc := newReplayCase(t, Limits{MaxOutbound: 200})
	s := rc.session(0)
	require.False(t, rc.c.MayRead(s, 300))
	require.True(t, s.Blocked())
	sameAfterReplay(t, rc.replay(), "a session blocked on full output")
}
