package session

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
// the server's flush does. One op is one firing: its wheel work, routing and
// encoding. With ack the receivers are bound in acknowledged mode, and
// every receiver's events are acknowledged after every turn (as a client
// acking each read does): the outbox's cost.
func BenchmarkFireDelivery(b *testing.B) {
	for _, ack := range []bool{false, true} {
		for _, n := range []int{100_000, 1_000_000} {
			b.Run(fmt.Sprintf("ack=%v/live=%d", ack, n), func(b *testing.B) { benchFireDelivery(b, n, ack) })
		}
	}
}

func benchFireDelivery(b *testing.B, n int, ack bool) {
	{
		{
			h := newHarness(b, nil)
			c := h.c
			var sessions [8]*Session
			for w := range sessions {
				sessions[w] = h.session()
				for r := range 64 {
					h.do(sessions[w], protocol.Request{Op: protocol.OpBind, Receiver: recvOf(w, r), Ack: ack})
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
				before := c.firedTotal
				target := c.Now() + 500
				for more := true; more; {
					more = c.Advance(target, 10_000)
					c.Flush(discardOut, nil) // as the server's flush does, with an empty socket buffer
					if ack {
						frame = ackAll(c, sessions[:], frame)
					}
				}
				if got := c.firedTotal - before; got != uint64(n) {
					b.Fatalf("fired %d, want %d", got, n)
				}
				fired += n
			}
		}
	}
}

func recvOf(w, r int) uint64 { return uint64(w+1)<<24 | uint64(r) }

// ackAll acknowledges every event sent to the sessions' receivers, one ack
// per receiver, and discards the replies.
func ackAll(c *Core, sessions []*Session, frame []byte) []byte {
	for w, s := range sessions {
		for r := range 64 {
			rec := c.receivers[recvOf(w, r)]
			if rec == nil || rec.sent == 0 {
				continue
			}
			req := protocol.Request{Op: protocol.OpAck, Receiver: rec.id, Seq: rec.firstSeq() + uint64(rec.sent) - 1}
			frame = protocol.AppendRequest(frame[:0], &req)
			c.Apply(s, frame[4:])
		}
		s.out = s.out[:0]
	}
	c.dirty = c.dirty[:0]
	for _, s := range sessions {
		s.dirty = false
	}
	return frame
}

// BenchmarkListPage measures one list request at the default limits (a
// page of up to 1000 timers, at most 1 MiB) on a receiver with 100k
// timers, inside the core without sockets: the wheel's walk, the copy,
// the encoding. One op is one page. With 4 KiB of data a page holds about
// 250 timers; without data, 1000.
func BenchmarkListPage(b *testing.B) {
	const count = 100_000
	for _, dataLen := range []int{0, 4096} {
		b.Run(fmt.Sprintf("timers=%d/data=%d", count, dataLen), func(b *testing.B) {
			h := newHarness(b, nil)
			s := h.session()
			req := protocol.Request{Op: protocol.OpAdd, Receiver: 1, After: 1000, Data: make([]byte, dataLen)}
			var frame []byte
			for i := range count {
				req.Tid = uint64(i) // ascending: the wheel's list walks them newest first
				frame = protocol.AppendRequest(frame[:0], &req)
				h.c.Apply(s, frame[4:])
				s.out = s.out[:0]
			}
			for _, from := range []uint64{0, count / 2} {
				b.Run(fmt.Sprintf("from=%d", from), func(b *testing.B) {
					list := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpList, Receiver: 1, FromTid: from})[4:]
					b.ReportAllocs()
					for b.Loop() {
						s.out = s.out[:0]
						h.c.Apply(s, list)
					}
					b.ReportMetric(float64(len(s.out)), "reply-bytes")
				})
			}
		})
	}
}
