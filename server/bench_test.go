package server

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
)

// BenchmarkFireDelivery is the load test's "fire" scenario inside the
// server, without sockets: n one-shot timers carrying 8 bytes of data, over
// 8 sessions of 64 bound receivers each, all due on one tick 500 ticks
// ahead (so they are moved down a level first), fired in turns of
// max_fires_per_turn with each session's output taken after every turn, as
// the glue's flush does. One op is one firing: its wheel work, routing and
// encoding.
func BenchmarkFireDelivery(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("live=%d", n), func(b *testing.B) {
			h := newStateHarness(b, nil)
			st := h.st
			var sessions [8]*session
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
					st.handle(s, frame[4:])
					s.out = s.out[:0]
				}
				b.StartTimer()
				before := st.firedTotal
				if err := st.clock.FastForward(500); err != nil {
					b.Fatal(err)
				}
				st.clockChanged()
				for more := true; more; {
					more = st.advance()
					for _, s := range st.dirty { // as flush does, with an empty socket buffer
						s.dirty = false
						s.written += uint64(len(s.out))
						s.out = s.out[:0]
						st.afterWrite(s, 0)
					}
					st.dirty = st.dirty[:0]
				}
				if got := st.firedTotal - before; got != uint64(n) {
					b.Fatalf("fired %d, want %d", got, n)
				}
				fired += n
			}
		})
	}
}

func recvOf(w, r int) uint64 { return uint64(w+1)<<24 | uint64(r) }
