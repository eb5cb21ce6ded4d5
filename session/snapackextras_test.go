package session

import (
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// The receivers in acknowledged mode with parked firings and held timers,
// whose copies a snapshot keeps in a side list (Snapshot.extras): encoded
// in pieces while those change, a snapshot is still the state of its
// instant.

// ackExtrasHarness: receivers 1..n bound in acknowledged mode by one
// client, outbox 2, each with a timer every tick (held once its firing
// parks) and five one-shots: after 3 ticks each has parked firings and a
// held tid (the receiverSnap's extra).
func ackExtrasHarness(t *testing.T, n uint64) (*harness, *client, map[uint64]uint64) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbox, l.MaxTimersPerReceiver = 2, 1000 })
	a := h.client("a")
	for r := uint64(1); r <= n; r++ {
		a.bindAck(r)
		a.add(protocol.Request{Receiver: r, Tid: 1, After: 1, Every: 1})
		for tid := uint64(2); tid <= 6; tid++ {
			a.add(protocol.Request{Receiver: r, Tid: tid, After: 2, Repeat: 1})
		}
	}
	h.advanceBy(3)
	a.ping()
	last := map[uint64]uint64{}
	for _, f := range a.fires() {
		last[f.Receiver] = max(last[f.Receiver], f.Seq)
	}
	require.NotZero(t, h.c.Counters().Parked)
	return h, a, last
}

// changeExtras changes receiver r's parked firings and held tids (and its
// record) in one of several ways, step i.
func changeExtras(h *harness, a *client, last map[uint64]uint64, i int, n uint64) {
	r := n - uint64(i)%n // from the last: receivers the encoder has not reached yet
	switch i % 5 {
	case 0: // more firings park
		a.call(protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: 200 + uint64(i), After: 1, Repeat: 1})
		h.advanceBy(1)
	case 1: // an ack lets parked firings out and resumes the held timer
		a.call(protocol.Request{Op: protocol.OpAck, Receiver: r, Seq: last[r]})
	case 2: // a new one-shot, and one cancelled (maybe parked)
		a.add(protocol.Request{Receiver: r, Tid: 100 + uint64(i), After: 1, Repeat: 1})
		a.call(protocol.Request{Op: protocol.OpCancel, Receiver: r, Tid: 2 + uint64(i)%5})
	case 3: // unbound, then bound again
		a.call(protocol.Request{Op: protocol.OpUnbind, Receiver: r})
		a.call(protocol.Request{Op: protocol.OpBind, Receiver: r, Ack: true})
	default: // the held timer paused by the user, then resumed
		a.call(protocol.Request{Op: protocol.OpPause, Receiver: r, Tid: 1})
		a.call(protocol.Request{Op: protocol.OpResume, Receiver: r, Tid: 1})
	}
	a.ping()
	for _, m := range a.events {
		if m.Kind == protocol.KindFire {
			last[m.Fire.Receiver] = max(last[m.Fire.Receiver], m.Fire.Seq)
		}
	}
	a.events = nil
	for len(a.inbox) > 0 {
		a.read()
	}
}

// A snapshot encoded a byte at a time while the receivers' parked firings
// and held tids change between its pieces encodes the state of its
// instant: with new copies, with a finished snapshot's reused, and with a
// DigestSnapshot in flight at the same time.
func TestSnapshotOfAckExtrasThatChangeWhileEncoded(t *testing.T) {
	const n = 25
	for _, mode := range []string{"new copies", "reused copies", "digest in flight"} {
		t.Run(mode, func(t *testing.T) {
			h, a, last := ackExtrasHarness(t, n)
			if mode != "new copies" {
				snapBytes(h.c) // leaves its copies for the next
			}
			want := snapBytes(h.c)
			wantDigest := stateDigest(h.c)
			if mode == "new copies" {
				h.c.spareRecvs, h.c.spareChunks = nil, nil
			}
			snap := h.c.Snapshot()
			var dsnap *Snapshot
			var sum uint64
			if mode == "digest in flight" {
				dsnap = h.c.DigestSnapshot(&sum)
			}
			var got, dgot []byte
			ddone := dsnap == nil
			for i := 0; ; i++ {
				var done bool
				got, done = snap.AppendNext(got, 1)
				if !ddone {
					dgot, ddone = dsnap.AppendNext(dgot, 1)
				}
				if done && ddone {
					break
				}
				changeExtras(h, a, last, i, n)
			}
			snap.Release()
			if dsnap != nil {
				dsnap.Release()
				require.Equal(t, wantDigest, [2]uint64{xxhash.Sum64(dgot), sum}, "the digest encoded while the extras changed")
			}
			requireSameState(t, h.c.cfg, want, got, "the snapshot encoded while the extras changed")
			// The next one, made in the copies kept, is the state now.
			got = snapBytes(h.c)
			h.c.spareRecvs, h.c.spareChunks = nil, nil
			requireSameState(t, h.c.cfg, snapBytes(h.c), got, "the next snapshot")
		})
	}
}

// The same, the encoder on a goroutine of its own while the loop goes on
// (run with -race): the loop never waits for it.
func TestSnapshotOfAckExtrasEncodedConcurrently(t *testing.T) {
	const n = 300
	changes := 0
	for round := range 3 {
		h, a, last := ackExtrasHarness(t, n)
		snapBytes(h.c)
		want := snapBytes(h.c)
		snap := h.c.Snapshot()
		var got []byte
		stop := make(chan struct{})
		go func() {
			defer close(stop)
			for done := false; !done; {
				got, done = snap.AppendNext(got, 16)
				time.Sleep(20 * time.Microsecond) // the loop goes on between pieces
			}
		}()
	loop:
		for i := 0; ; i++ {
			select {
			case <-stop:
				break loop
			default:
			}
			changeExtras(h, a, last, i+round, n)
			changes++
		}
		snap.Release()
		requireSameState(t, h.c.cfg, want, got, "the snapshot encoded concurrently")
	}
	t.Logf("%d changes while the snapshots were encoded", changes)
	require.Greater(t, changes, 30)
}
