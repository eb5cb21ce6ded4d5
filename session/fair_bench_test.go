package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// BenchmarkBigTickOtherReceiver measures what issue 24 item 12 is about:
// 1M timers on one cron minute ("* * * * *") over `receivers` receivers of
// 8 sessions, and one more timer on the same minute of another receiver,
// B, added last on a session of its own. One op is that minute, fired in
// turns of max_fires_per_turn (10,000) with every session's output taken
// after each turn, as the server's flush does. It reports the turns until
// B's event was written (turns-to-B: 1 is the tick's first turn), the time
// from the minute's first turn until then (ms-to-B), the first turn's
// Advance alone (ms-turn1: it also moves the minute's timers down to the
// wheel's lowest level and orders them), and the whole minute's (ms/tick).
func BenchmarkBigTickOtherReceiver(b *testing.B) {
	const n = 1_000_000
	for _, receivers := range []int{1, 512} {
		b.Run(fmt.Sprintf("timers=%d/receivers=%d", n, receivers), func(b *testing.B) {
			h := newHarness(b, func(_ *Config, l *Limits) { l.MaxTimersPerReceiver = n })
			c := h.c
			var sessions [8]*Session
			for w := range sessions {
				sessions[w] = h.session()
			}
			recv := func(i int) (int, uint64) { // A's i-th timer: its session and receiver
				r := i % receivers
				return r % 8, recvOf(r%8, r/8)
			}
			for r := range receivers {
				w, id := recv(r)
				h.do(sessions[w], protocol.Request{Op: protocol.OpBind, Receiver: id})
			}
			sb := h.session()
			const bRecv = 1 << 40
			h.do(sb, protocol.Request{Op: protocol.OpBind, Receiver: bRecv})
			req := protocol.Request{Op: protocol.OpAdd, Schedule: "* * * * *"}
			var frame []byte
			for i := range n {
				w, id := recv(i)
				req.Receiver, req.Tid = id, uint64(i+1)
				frame = protocol.AppendRequest(frame[:0], &req)
				c.Apply(sessions[w], frame[4:])
				sessions[w].out = sessions[w].out[:0]
			}
			req.Receiver, req.Tid = bRecv, 1
			h.do(sb, req)
			var turnsToB, nsToB, nsTick, nsTurn1 int64
			b.ResetTimer()
			for b.Loop() {
				in, err := c.wheel.Get(wheel.Key{Receiver: bRecv, Tid: 1})
				if err != nil {
					b.Fatal(err)
				}
				before := c.firedTotal
				t0 := time.Now()
				turns, seen := 0, false
				for more := true; more; {
					turns++
					more = c.Advance(in.Due, c.cfg.MaxFiresPerTurn)
					if turns == 1 {
						nsTurn1 += time.Since(t0).Nanoseconds()
					}
					c.Flush(func(s *Session, out []byte) int {
						if s == sb && !seen {
							seen = true
							turnsToB += int64(turns)
							nsToB += time.Since(t0).Nanoseconds()
						}
						return 0
					}, nil)
				}
				nsTick += time.Since(t0).Nanoseconds()
				if !seen {
					b.Fatal("B's event was not written")
				}
				if got := c.firedTotal - before; got != n+1 {
					b.Fatalf("fired %d, want %d", got, n+1)
				}
			}
			b.ReportMetric(float64(turnsToB)/float64(b.N), "turns-to-B")
			b.ReportMetric(float64(nsToB)/float64(b.N)/1e6, "ms-to-B")
			b.ReportMetric(float64(nsTick)/float64(b.N)/1e6, "ms/tick")
			b.ReportMetric(float64(nsTurn1)/float64(b.N)/1e6, "ms-turn1")
			b.ReportMetric(float64(nsTick)/float64(b.N)/float64(n+1), "ns/fire")
		})
	}
}
