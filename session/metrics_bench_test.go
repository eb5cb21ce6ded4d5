package session

import (
	"encoding/binary"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
)

// BenchmarkFireMetrics is BenchmarkFireDelivery's firing (100,000 live
// timers, 8 sessions × 64 bound receivers, no acks) with the operator
// metrics' per-firing notes off and on, the runs taken every turn as the
// server does: what metrics cost the event loop's hot path. Compare the
// two with benchstat (docs/BENCHMARKS.md).
func BenchmarkFireMetrics(b *testing.B) {
	b.Run("metrics=off", func(b *testing.B) { benchFireMetrics(b, false) })
	b.Run("metrics=on", func(b *testing.B) { benchFireMetrics(b, true) })
}

func benchFireMetrics(b *testing.B, on bool) {
	const n = 100_000
	h := newHarness(b, nil)
	c := h.c
	c.SetMetrics(on)
	var taken uint64
	take := func(runs []LateRun) {
		for _, r := range runs {
			taken += r.N
		}
	}
	var sessions [8]*Session
	for w := range sessions {
		sessions[w] = h.session()
		for r := range 64 {
			h.do(sessions[w], protocol.Request{Op: protocol.OpBind, Receiver: recvOf(w, r)})
		}
	}
	req := protocol.Request{Op: protocol.OpAdd, After: 500, Repeat: 1, Data: make([]byte, 8)}
	var frame []byte
	b.ReportAllocs()
	for fired := 0; fired < b.N; {
		b.StopTimer()
		for i := range n {
			s := sessions[i%8]
			req.Receiver, req.Tid = recvOf(i%8, i/8%64), uint64(i+1)
			binary.BigEndian.PutUint64(req.Data, uint64(i))
			frame = protocol.AppendRequest(frame[:0], &req)
			c.Apply(s, frame[4:])
			s.out = s.out[:0]
		}
		b.StartTimer()
		target := c.Now() + 500
		for more := true; more; {
			more = c.Advance(target, 10_000)
			c.Flush(discardOut, nil)
			c.TakeLates(take)
		}
		fired += n
	}
	if on && taken < uint64(b.N) {
		b.Fatalf("lateness noted for %d firings of %d", taken, b.N)
	}
}
