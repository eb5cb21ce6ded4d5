package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestSnapshotGroupsCopied: the groups section of a snapshot is the state
// when Snapshot was taken, byte for byte (and the wheel's decodes to it), though its members are encoded
// later (AppendNext, on another goroutine) while the loop goes on
// changing the groups: cancels free member nodes, adds reuse them in
// place, bulk operations walk and remove members, groups are paused,
// emptied and made. An encoder that read the live table (or a copy
// sharing its nodes) would write the changed members.
func TestSnapshotGroupsCopied(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBulkPerTurn = 3 })
	s := h.session()
	add := func(r, tid, g uint64) {
		h.send(s, protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: tid, After: 1000, Group: g})
	}
	for i := range uint64(60) {
		add(1+i%4, i, 1+i%3)
	}
	h.send(s, protocol.Request{Op: protocol.OpPauseAll, Receiver: 2})
	h.send(s, protocol.Request{Op: protocol.OpPauseAll, Group: 2}) // in progress: a cursor in the group
	h.take(s)
	require.Positive(t, h.c.BulkInProgress())

	ref := h.c.Snapshot()
	want, _ := ref.AppendNext(nil, 0) // encoded at once: the world stopped
	ref.Release()

	snap := h.c.Snapshot()
	mutate := func(base uint64) {
		for i := uint64(0); i < 60; i += 2 {
			h.send(s, protocol.Request{Op: protocol.OpCancel, Receiver: 1 + i%4, Tid: i})
		}
		for i := range uint64(40) { // into the freed nodes, in other groups and order
			add(1+i%4, base+i, 7+i%2)
		}
		h.send(s, protocol.Request{Op: protocol.OpCancelAll, Group: 1})
		h.send(s, protocol.Request{Op: protocol.OpPauseAll, Group: 3})
		h.send(s, protocol.Request{Op: protocol.OpResumeAll, Receiver: 2})
		for h.advance() {
		}
		h.take(s)
	}
	mutate(1000)
	done := make(chan []byte)
	go func() { // the encoder's goroutine, while the loop goes on (-race)
		var got []byte
		for fin := false; !fin; {
			got, fin = snap.AppendNext(got, 64)
		}
		done <- got
	}()
	mutate(2000)
	got := <-done
	snap.Release()
	requireSameState(t, h.c.cfg, want, got, "the snapshot is the state when taken")

	now := h.c.Snapshot()
	changed, _ := now.AppendNext(nil, 0)
	now.Release()
	require.NotEqual(t, want, changed, "the groups did change meanwhile")
}
