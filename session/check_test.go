package session

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// snapBytes encodes c's snapshot whole.
func snapBytes(c *Core) []byte {
	snap := c.Snapshot()
	defer snap.Release()
	b, _ := snap.AppendNext(nil, 0)
	return b
}

// A check mark ends the record it is in; a Core replaying the records up
// to it takes its id, and its snapshot then is the marking Core's, byte
// for byte — acknowledged events, bound receivers, a turn's output flushed
// and a quiet session's fields (not recorded until the mark) included. A Core that missed a record has another snapshot.
func TestCheckMarkReplayedSameSnapshot(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	h.do(s, protocol.Request{Op: protocol.OpBind, Receiver: 7, Ack: true})
	for tid := uint64(1); tid <= 20; tid++ {
		h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: tid, After: tid % 4})
	}
	h.c.SetClock(1, false)
	for range 3 {
		h.c.Advance(h.c.Now()+1, h.c.cfg.MaxFiresPerTurn)
		h.rep.sync()
		h.flush()
	}
	h.do(s, protocol.Request{Op: protocol.OpAck, Receiver: 7, Seq: 2})
	skipped := takeRecord(h.c) // nothing: every record so far went to the replica
	require.Empty(t, skipped)
	q := h.c.Open() // a quiet session: its hello and its reads are not recorded until it changes state
	h.do(q, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "quiet", Token: testAdminToken})
	h.do(q, protocol.Request{Op: protocol.OpGet, Receiver: 7, Tid: 3})
	missed := snapBytes(h.c) // the state without the last add: a node that missed its record
	h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 99, After: 50})

	h.c.MarkCheck(42)
	rec := takeRecord(h.c)
	require.NotEmpty(t, rec)
	want := snapBytes(h.c)
	_, ok := h.rep.c.TakeCheck()
	require.False(t, ok, "no mark replayed yet")
	h.rep.replay(rec)
	id, ok := h.rep.c.TakeCheck()
	require.True(t, ok)
	require.Equal(t, uint64(42), id)
	require.True(t, bytes.Equal(want, snapBytes(h.rep.c)), "the replica's state at the mark is the marking Core's")
	require.False(t, bytes.Equal(want, missed), "a Core without the last add has another snapshot")
	_, ok = h.rep.c.TakeCheck()
	require.False(t, ok, "TakeCheck forgets the mark")
}

// With recording off (a follower's Core), MarkCheck records nothing.
func TestCheckMarkNotRecording(t *testing.T) {
	h := newHarness(t, nil)
	h.rep.sync()
	h.c.Record(false)
	h.c.MarkCheck(1)
	rec, _ := h.c.TakeRecord()
	require.Empty(t, rec)
	h.c.Record(true)
}

// A leader marks a check, between turns, while replies wait in its
// sessions' output for the turns in flight (HoldTurn; reads wait too,
// SetReadsWait): a read's reply among them, that a replica replays as zero
// bytes of its length. The replica is in the same state at the mark: the
// state digests agree. A reply more waiting, or an add the replica missed,
// changes the digest.
func TestCheckDigestWithRepliesHeld(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 1, After: 50})
	q := h.c.Open() // quiet: its reads are recorded as its output's length at the mark
	h.do(q, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "quiet", Token: testAdminToken})
	h.c.SetReadsWait(true)
	turn := uint64(0)
	held := func(from *Session, req protocol.Request) { // a turn whose record is in flight
		h.send(from, req) // (the harness's replica took its record)
		turn++
		h.c.HoldTurn(turn)
		h.flush()
	}
	held(s, protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 2, After: 9}) // replayed as it is
	held(q, protocol.Request{Op: protocol.OpGet, Receiver: 7, Tid: 1})           // not replayed
	held(s, protocol.Request{Op: protocol.OpStats})                              // a pad
	require.NotZero(t, q.Pending())
	require.NotZero(t, s.Pending())

	h.c.MarkCheck(7)
	rec := takeRecord(h.c)
	want := stateDigest(h.c)
	h.rep.replay(rec)
	_, ok := h.rep.c.TakeCheck()
	require.True(t, ok)
	require.Equal(t, want, stateDigest(h.rep.c), "the replica's state at the mark digests as the marking Core's")

	held(q, protocol.Request{Op: protocol.OpGet, Receiver: 7, Tid: 1})
	require.NotEqual(t, want, stateDigest(h.c), "a reply more waiting: another digest")
	h.c.MarkCheck(8)
	h.rep.replay(takeRecord(h.c))
	require.Equal(t, stateDigest(h.c), stateDigest(h.rep.c))
	rep := h.rep
	h.rep = nil // the replica misses the next add's record
	h.send(s, protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 3, After: 9})
	h.c.MarkCheck(9)
	takeRecord(h.c)
	require.NotEqual(t, stateDigest(h.c), stateDigest(rep.c), "a replica that missed an add digests differently")
}

// A Core restored from a snapshot (a node that took the leader's
// InstallSnapshot, or restarted from its own) is in the snapshot's state:
// its state digest is the original's, with acknowledged receivers and
// their parked firings, a backlog, groups, request ids and a cancelled
// timer's freed node in the state.
func TestCheckDigestOfRestoredCore(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	h.do(s, protocol.Request{Op: protocol.OpBind, Receiver: 7, Ack: true})
	for tid := uint64(1); tid <= 30; tid++ {
		h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: 7 + tid%3, Tid: tid, After: tid % 5, Group: tid % 4,
			Data: []byte{byte(tid)}, Client: 99})
	}
	h.do(s, protocol.Request{Op: protocol.OpCancel, Receiver: 7, Tid: 3})
	h.c.SetClock(1, false)
	for range 4 {
		h.c.Advance(h.c.Now()+1, h.c.cfg.MaxFiresPerTurn)
		h.rep.sync()
		h.flush()
	}
	h.do(s, protocol.Request{Op: protocol.OpAck, Receiver: 7, Seq: 1})
	r, err := Restore(h.c.cfg, snapBytes(h.c), nil, nil)
	require.NoError(t, err)
	require.NotZero(t, h.c.Wheel().Len())
	require.Equal(t, stateDigest(h.c), stateDigest(r), "the restored Core digests as the original")
}
