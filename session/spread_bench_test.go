package session

import (
	"fmt"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// BenchmarkSameMinuteCron measures a minute at which n timers with the same
// cron schedule ("* * * * *") are due on one tick, over 8 sessions of 64
// bound receivers each, fired in turns of max_fires_per_turn with every
// session's output taken after each turn, as the server's flush does. One
// op is one such minute: every firing's wheel work, its next time from the
// schedule, the wheel's reschedule, routing and encoding. ns/fire is the
// cost of one firing.
func BenchmarkSameMinuteCron(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			h := newHarness(b, nil)
			c := h.c
			var sessions [8]*Session
			for w := range sessions {
				sessions[w] = h.session()
				for r := range 64 {
					h.do(sessions[w], protocol.Request{Op: protocol.OpBind, Receiver: recvOf(w, r)})
				}
			}
			req := protocol.Request{Op: protocol.OpAdd, Schedule: "* * * * *"}
			var frame []byte
			for i := range n {
				s := sessions[i%8]
				req.Receiver, req.Tid = recvOf(i%8, i/8%64), uint64(i+1)
				frame = protocol.AppendRequest(frame[:0], &req)
				c.Apply(s, frame[4:])
				s.out = s.out[:0]
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				before := c.firedTotal
				in, err := c.wheel.Get(wheel.Key{Receiver: recvOf(0, 0), Tid: 1})
				if err != nil {
					b.Fatal(err)
				}
				for more := true; more; {
					more = c.Advance(in.Due, c.cfg.MaxFiresPerTurn)
					c.Flush(discardOut, nil)
				}
				if got := c.firedTotal - before; got != uint64(n) {
					b.Fatalf("fired %d, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fire")
		})
	}
}
