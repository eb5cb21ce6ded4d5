package session

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Regression tests from the red-team review of the durable core: each
// failed before its fix.

// TestAddOnlyBoundIsState: add_only_bound decides whether an add succeeds,
// so it is state: a snapshot holds it and SetAddOnlyBound is recorded. A
// server restarted with it switched on replays the adds acknowledged while
// it was off, and refuses new ones from then on.
func TestAddOnlyBoundIsState(t *testing.T) {
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000}
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	live := New(cfg, Limits{}, w, nil, nil)
	snap := live.Snapshot()
	base, _ := snap.AppendNext(nil, 0)
	snap.Release()
	live.Record(true)
	s := live.Open()
	live.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "a", Token: testAdminToken})[4:])
	live.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: 7, Receiver: 5, Tid: 1, After: 100})[4:])
	live.Flush(discardOut, nil)
	require.Equal(t, 1, live.Wheel().Len(), "the add was acknowledged")
	live.SetAddOnlyBound(true)
	live.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: 8, Receiver: 5, Tid: 2, After: 100})[4:])
	live.Flush(discardOut, nil)
	require.Equal(t, 1, live.Wheel().Len(), "refused once add_only_bound is on")
	rec, _ := live.TakeRecord()

	cfg.AddOnlyBound = true // the restart's config: the snapshot's value wins
	replayed, err := Restore(cfg, base, nil, nil)
	require.NoError(t, err)
	require.NoError(t, replayed.Replay(rec))
	require.Equal(t, 1, replayed.Wheel().Len(), "the acknowledged timer, and not the refused one")
	require.True(t, replayed.addOnlyBound)
}

// TestRestoreBacklogOverMaxBacklog: SetLimits does not trim the
// backlogs, so a receiver may hold more events than max_backlog (the
// server records its configured limits at every start: lowering
// max_backlog in the config does it). A snapshot then holds those events,
// and restoring it gives them back in order, none overwritten (the ring
// grows past max_backlog for them), with the same snapshot bytes.
func TestRestoreBacklogOverMaxBacklog(t *testing.T) {
	cfg := Config{AdminToken: testAdminToken, TickNs: 10_000_000, MaxFiresPerTurn: 10_000}
	w, err := wheel.New(start, wheel.Config{})
	require.NoError(t, err)
	c := New(cfg, Limits{MaxBacklog: 100}, w, nil, nil)
	s := c.Open()
	c.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "a", Token: testAdminToken})[4:])
	for tid := uint64(1); tid <= 10; tid++ { // unbound receiver 9: the events wait in its backlog
		c.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, Receiver: 9, Tid: tid, After: tid, Repeat: 1})[4:])
	}
	c.Flush(discardOut, nil)
	c.Advance(start+20, 0)
	require.Equal(t, 10, c.Receivers()[0].Backlog)
	c.SetLimits(Limits{MaxBacklog: 2}) // the configured limits of a restart

	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		var b []byte
		for done := false; !done; {
			b, done = snap.AppendNext(b, 1<<16)
		}
		return b
	}
	data := encode(c)
	r, err := Restore(cfg, data, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 10, r.Receivers()[0].Backlog)
	// The frames in order: seq 1..10.
	rr := r.receivers[9]
	var seqs []uint64
	for _, f := range rr.backlogFrames() {
		payload, _, err := protocol.SplitFrame(f, 1<<20)
		require.NoError(t, err)
		var m protocol.Message
		require.NoError(t, protocol.DecodeMessage(payload, &m))
		seqs = append(seqs, m.Fire.Seq)
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seqs, "restored backlog frames")
	require.True(t, bytes.Equal(data, encode(r)), "the restored state snapshots differently from the live one")
}

// TestRestoreAfterDroppedNoticeLeft: a dropped notice written after other
// output (its start past 0), then flushed, left noteEnd 0 ("none") and the
// old noteStart; the snapshot kept both and Restore refused it ("dropped
// notice at 2120..0 of 0 bytes"), so a server killed after such a
// snapshot did not start again (found by the soak of loadtest/cmd/soak).
// A snapshot of that state restores (so do those already written), and
// encodes again to the same bytes.
func TestRestoreAfterDroppedNoticeLeft(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklog = 2; l.MaxOutbound = 1 })
	a := h.client("a")
	a.bind(1, false)
	for tid := uint64(1); tid <= 6; tid++ {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	h.c.Advance(start+1, 0) // one fire goes out, then a notice of seqs 2..4 after it
	ms := h.take(a.s)
	require.Len(t, ms, 2)
	require.Equal(t, protocol.KindDropped, ms[1].Kind)
	require.Zero(t, a.s.noteEnd, "the notice left")

	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		var b []byte
		for done := false; !done; {
			b, done = snap.AppendNext(b, 1<<16)
		}
		return b
	}
	cfg := h.c.cfg
	data := encode(h.c)
	r, err := Restore(cfg, data, nil, nil)
	require.NoError(t, err)
	require.Equal(t, data, encode(r), "the restored state snapshots as the live one")
}
