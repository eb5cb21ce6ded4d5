package session

import (
	"slices"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// BenchmarkBulkChunk runs cancel_group and pause_all of a group of 1M
// timers (spread over 10 receivers) at the default max_bulk_per_turn, one
// chunk per Advance as the loop's turns run them, and reports the time to
// complete (ms/op-complete) and each chunk's time, the loop pause a bulk
// operation adds to a turn: median (chunk-p50-us) and longest
// (chunk-max-us). ns/op is the time of the whole operation.
func BenchmarkBulkChunk(b *testing.B) {
	for _, op := range []protocol.Op{protocol.OpCancelGroup, protocol.OpPauseAll} {
		b.Run(op.String(), func(b *testing.B) { bulkChunk(b, op, 0) })
	}
}

// bulkChunk is BenchmarkBulkChunk's op with the groups' orderMin (0: the
// default).
func bulkChunk(b *testing.B, op protocol.Op, orderMin int) {
	const timers = 1_000_000
	var total time.Duration
	var chunks []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b, func(_ *Config, l *Limits) { l.MaxTimersPerReceiver = timers })
		h.c.groups.orderMin = orderMin
		s := h.session()
		var frame []byte
		for i := range uint64(timers) {
			frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 1 + i%10, Tid: i, After: 1_000_000, Repeat: 1, Group: 9})
			h.c.Apply(s, frame[4:])
		}
		h.take(s)
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: op, ID: 1, Group: 9})
		b.StartTimer()
		start := time.Now()
		h.c.Apply(s, frame[4:]) // the first chunk
		chunks = append(chunks, time.Since(start))
		for h.c.BulkInProgress() > 0 {
			t := time.Now()
			h.c.Advance(h.c.Now(), 0)
			chunks = append(chunks, time.Since(t))
		}
		total += time.Since(start)
		n++
	}
	slices.Sort(chunks)
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms/op-complete")
	b.ReportMetric(float64(chunks[len(chunks)/2].Microseconds()), "chunk-p50-us")
	b.ReportMetric(float64(chunks[len(chunks)*99/100].Microseconds()), "chunk-p99-us")
	b.ReportMetric(float64(chunks[len(chunks)-1].Microseconds()), "chunk-max-us")
}

// BenchmarkAppendGroups is the groups section of a snapshot of 1M grouped
// timers, encoded at once (Snapshot's AppendNext encodes it off the loop,
// from a copy: see BenchmarkSnapshotLoopGroups).
func BenchmarkAppendGroups(b *testing.B) {
	var c Core
	for i := range uint64(1_000_000) {
		c.groups.join(wheel.Key{Receiver: 1 + i%10, Tid: i}, 1+i%3)
	}
	var e encoder
	for b.Loop() {
		e.b = e.b[:0]
		c.appendGroups(&e)
	}
	b.ReportMetric(float64(len(e.b))/1e6, "MB")
}

// BenchmarkSnapshotLoopGroups is Core.Snapshot's cost on the loop with 1M
// grouped timers (in 3 groups over 10 receivers, in the wheel): "encode"
// as it was, the groups section encoded at once (appendCore), and "copy"
// as Snapshot does it now, the member nodes copied and encoded later by
// AppendNext. Both include the receivers' records and the wheel's Freeze.
func BenchmarkSnapshotLoopGroups(b *testing.B) {
	const timers = 1_000_000
	h := newHarness(b, func(_ *Config, l *Limits) { l.MaxTimersPerReceiver = timers })
	s := h.session()
	var frame []byte
	for i := range uint64(timers) {
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 1 + i%10, Tid: i, After: 1_000_000, Group: 1 + i%3})
		h.c.Apply(s, frame[4:])
	}
	h.take(s)
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			e := encoder{}
			h.c.appendCore(&e)
			snap := &Snapshot{core: e.b, owner: h.c}
			snap.recvs, snap.chunks, snap.extras = h.c.receiverSnaps()
			snap.frozen = h.c.wheel.Freeze()
			b.StopTimer()
			snap.Release()
			b.StartTimer()
		}
	})
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			snap := h.c.Snapshot()
			b.StopTimer()
			snap.Release()
			b.StartTimer()
		}
	})
}
