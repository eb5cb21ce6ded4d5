package session

import (
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// BenchmarkBulkChunk is one loop turn's chunk of a bulk operation on a
// group of 1M timers (spread over 10 receivers): max_bulk_per_turn
// (10,000) timers cancelled or paused, the cost a bulk operation adds to
// each turn it runs in. It reports ns per chunk (op) and the time to
// complete the whole operation, chunk after chunk.
func BenchmarkBulkChunk(b *testing.B) {
	for _, op := range []protocol.Op{protocol.OpCancelAll, protocol.OpPauseAll} {
		b.Run(op.String(), func(b *testing.B) {
			const timers = 1_000_000
			var chunks, total time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				h := newHarness(b, func(_ *Config, l *Limits) { l.MaxTimersPerReceiver = timers })
				s := h.session()
				var frame []byte
				for i := range uint64(timers) {
					frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 1 + i%10, Tid: i, After: 1_000_000, Repeat: 1, Group: 9})
					h.c.Apply(s, frame[4:])
				}
				h.take(s)
				frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: op, ID: 1, Group: 9})
				start := time.Now()
				b.StartTimer()
				h.c.Apply(s, frame[4:]) // the first chunk
				b.StopTimer()
				chunks += time.Since(start)
				n++
				for h.c.BulkInProgress() > 0 {
					h.c.Advance(h.c.Now(), 0)
				}
				total += time.Since(start)
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms/op-complete")
			_ = wheel.Key{}
		})
	}
}
