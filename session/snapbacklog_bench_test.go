package session

import (
	"fmt"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
)

// BenchmarkSnapshotLoopBacklogs is Core.Snapshot's cost on the loop with
// events held in backlogs: receivers no session is bound to, each with a
// timer that fired every tick for a number of ticks. 10,000 receivers of
// 36 events is the state a scale run reached when its receivers' sessions
// were gone; 100,000 of 10 the default max_backlog_total, over the most
// receivers issue 26 asks for. Each snapshot is encoded (untimed), as the
// server's encoder does, before the next is taken.
func BenchmarkSnapshotLoopBacklogs(b *testing.B) {
	for _, c := range []struct{ receivers, ticks int }{{10_000, 36}, {100_000, 10}} {
		b.Run(fmt.Sprintf("receivers=%d/events=%d", c.receivers, c.receivers*c.ticks), func(b *testing.B) {
			benchSnapshotLoopBacklogs(b, uint64(c.receivers), uint64(c.ticks))
		})
	}
}

func benchSnapshotLoopBacklogs(b *testing.B, receivers, ticks uint64) {
	h := newHarness(b, nil)
	s := h.session()
	var frame []byte
	for r := range receivers {
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: r, Receiver: 1 + r, Tid: 1, After: 1 + ticks, Every: 1})
		h.c.Apply(s, frame[4:])
	}
	h.take(s)
	h.advanceBy(2 * ticks)
	if got := h.c.backlogEvents; got != receivers*ticks {
		b.Fatalf("%d events in backlogs, want %d", got, receivers*ticks)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		snap := h.c.Snapshot()
		b.StopTimer()
		for done := false; !done; { // as the server's encoder does: the copies are kept for the next
			buf, done = snap.AppendNext(buf[:0], 1<<20)
		}
		snap.Release()
		b.StartTimer()
	}
}
