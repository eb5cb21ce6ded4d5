package session

import (
	"bytes"
	"cmp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// backlogHarness is a harness with receivers 1..n no session is bound to,
// each with a timer firing every tick: after ticks ticks each holds ticks
// events in its backlog (in several chunks: a frame is about 30 bytes, the
// first chunk 256).
func backlogHarness(t *testing.T, n, ticks uint64) (*harness, *Session) {
	h := newHarness(t, nil)
	s := h.session()
	for r := uint64(1); r <= n; r++ {
		h.do(s, protocol.Request{Op: protocol.OpAdd, ID: r, Receiver: r, Tid: 1, After: 1, Every: 1})
	}
	h.advanceBy(ticks)
	require.Equal(t, n*ticks, h.c.backlogEvents)
	return h, s
}

// advanceBy moves tw-time ticks on and runs the turns that fire.
func (h *harness) advanceBy(ticks uint64) {
	for target := h.c.Now() + ticks; h.c.Advance(target, h.c.cfg.MaxFiresPerTurn) || h.c.More(); {
	}
	if h.rep != nil {
		h.rep.sync()
	}
}

// A snapshot shares the backlogs' chunks with the live receivers: while it
// is encoded, events pushed to them, backlogs drained by binds and records
// forgotten must not show in it. It encodes the state at the instant it
// was taken, whether its copies are new or a finished snapshot's reused.
func TestSnapshotOfBacklogsThatChangeWhileEncoded(t *testing.T) {
	for _, reused := range []bool{false, true} {
		t.Run(map[bool]string{false: "new copies", true: "reused copies"}[reused], func(t *testing.T) {
			h, _ := backlogHarness(t, 40, 30)
			if reused { // a finished snapshot of more receivers leaves its copies
				more, _ := backlogHarness(t, 60, 3)
				h.c.spareRecvs, h.c.spareChunks = nil, nil
				snap := more.c.Snapshot()
				_, done := snap.AppendNext(nil, 0)
				require.True(t, done)
				snap.Release()
				h.c.spareRecvs, h.c.spareChunks = more.c.spareRecvs, more.c.spareChunks
				require.NotZero(t, cap(h.c.spareChunks))
			}
			want := snapBytes(h.c)
			if reused {
				h.c.spareRecvs, h.c.spareChunks = h.c.spareRecvs[:0], h.c.spareChunks[:0]
			}

			snap := h.c.Snapshot()
			var got []byte
			b := h.session()
			for i := 0; ; i++ {
				var done bool
				got, done = snap.AppendNext(got, 1)
				if done {
					break
				}
				switch i % 3 { // between two receivers' records
				case 0:
					h.advanceBy(1) // an event more in each backlog
				case 1: // a backlog drained to the new session, then the record forgotten
					h.do(b, protocol.Request{Op: protocol.OpBind, Receiver: uint64(1 + i%40)})
					h.do(b, protocol.Request{Op: protocol.OpCancel, Receiver: uint64(1 + i%40), Tid: 1})
					h.do(b, protocol.Request{Op: protocol.OpUnbind, Receiver: uint64(1 + i%40)})
				default:
					h.do(b, protocol.Request{Op: protocol.OpAdd, Receiver: 1000 + uint64(i), Tid: 1, After: 1})
				}
			}
			snap.Release()
			requireSameState(t, h.c.cfg, want, got, "the snapshot encoded while its backlogs changed")
			forgotten := 0
			for r := uint64(1); r <= 40; r++ {
				if h.c.receivers[r] == nil {
					forgotten++
				}
			}
			require.NotZero(t, forgotten, "records forgotten meanwhile")
			requireListed(t, h.c)

			// The copies kept for the next snapshot hold no frames.
			kept := 0
			for _, c := range h.c.spareChunks[:cap(h.c.spareChunks)] {
				kept += len(c)
			}
			require.Zero(t, kept, "frames kept by the copies for the next snapshot")
			// The next one, made in them, is the state now.
			got = snapBytes(h.c)
			h.c.spareRecvs, h.c.spareChunks = nil, nil
			requireSameState(t, h.c.cfg, snapBytes(h.c), got, "the next snapshot")
		})
	}
}

// requireListed checks that c.recvList lists the records of c.receivers,
// each at its place.
func requireListed(t *testing.T, c *Core) {
	t.Helper()
	require.Len(t, c.recvList, len(c.receivers))
	for i, r := range c.recvList {
		require.Same(t, c.receivers[r.id], r)
		require.Equal(t, i, r.listed)
	}
}

// A snapshot lists the receivers in ascending id order. Restore refuses
// one whose records are out of order or repeat an id: a repeated one
// would leave a record in the walk of all records (Core.recvList) that
// no id finds, kept and snapshotted for good.
func TestRestoreRefusesReceiversOutOfOrder(t *testing.T) {
	h, _ := backlogHarness(t, 2, 1)
	data := snapBytes(h.c)
	recs, chunks, _ := h.c.receiverSnaps()
	slices.SortFunc(recs, func(a, b receiverSnap) int { return cmp.Compare(a.id, b.id) })
	var one, two encoder
	appendReceiver(&one, &recs[0], chunks[recs[0].first:recs[0].first+recs[0].n], &recvExtra{})
	appendReceiver(&two, &recs[1], chunks[recs[1].first:recs[1].first+recs[1].n], &recvExtra{})
	require.Equal(t, len(one.b), len(two.b))
	at := bytes.Index(data, append(slices.Clone(one.b), two.b...))
	require.Positive(t, at, "the two records, back to back")
	_, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)

	for name, recs := range map[string][]byte{
		"repeated":     append(slices.Clone(one.b), one.b...),
		"out of order": append(slices.Clone(two.b), one.b...),
	} {
		bad := slices.Clone(data)
		copy(bad[at:], recs)
		_, err := Restore(h.c.cfg, bad, nil, nil)
		require.ErrorContains(t, err, "receiver 1 after receiver", name)
	}
}

// The copies a snapshot leaves for the next are let go once far more than
// the receivers need: they keep no high-water mark's memory for good.
func TestSnapshotCopiesShrinkWithTheReceivers(t *testing.T) {
	const n, kept = 3000, 100
	h, _ := backlogHarness(t, n, 1)
	snapBytes(h.c)
	require.GreaterOrEqual(t, cap(h.c.spareRecvs), n)
	require.GreaterOrEqual(t, cap(h.c.spareRefs), n)
	b := h.session()
	for r := uint64(kept + 1); r <= n; r++ { // drained, no timer: forgotten
		h.do(b, protocol.Request{Op: protocol.OpBind, Receiver: r})
		h.do(b, protocol.Request{Op: protocol.OpCancel, Receiver: r, Tid: 1})
		h.do(b, protocol.Request{Op: protocol.OpUnbind, Receiver: r})
	}
	require.Len(t, h.c.receivers, kept)
	snapBytes(h.c)
	require.Nil(t, h.c.spareRecvs)
	require.Nil(t, h.c.spareRefs)
	snapBytes(h.c)
	require.Less(t, cap(h.c.spareRecvs), 2*kept)
}
