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

// BenchmarkLoadOf: the walk behind the status page's tables and the
// backlog gauges (once a second, and per scrape, on the event loop), with
// 20,000 receivers holding queued events and 50,000 more holding a timer,
// walking at most 1,000 records and 10,000 receivers with timers (as
// server.ReadMetrics does).
func BenchmarkLoadOf(b *testing.B) {
	h := newHarness(b, nil)
	s := h.session()
	var frame []byte
	add := func(r, after uint64) {
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: 1, After: after, Repeat: 1})
		h.c.Apply(s, frame[4:])
		s.out = s.out[:0]
	}
	for r := uint64(1); r <= 20_000; r++ {
		add(r, 1)
	}
	h.c.Advance(h.c.Now()+1, 1<<30) // unbound: their events wait in backlogs
	for r := uint64(100_000); r < 150_000; r++ {
		add(r, 1000)
	}
	b.ReportAllocs()
	for b.Loop() {
		ld := h.c.LoadOf(10, 1_000, 10_000)
		if len(ld.TopTimers) != 10 || len(ld.TopBacklog) != 10 || !ld.Sampled {
			b.Fatalf("load %+v", ld)
		}
	}
}

// BenchmarkNoteLate: what metrics add to a late firing in the loop (the
// wheel catching up): the note into a run. An on-time firing costs two
// compares in onFire and is counted at TakeLates.
func BenchmarkNoteLate(b *testing.B) {
	h := newHarness(b, nil)
	h.c.SetMetrics(true)
	h.c.target = h.c.Now() + 5
	tick := h.c.target - 3
	n := 0
	for b.Loop() {
		h.c.noteLate(tick)
		if n++; n == 10_000 { // a turn's worth (max_fires_per_turn)
			h.c.TakeLates(func([]LateRun) {})
			n = 0
		}
	}
}
