package session_test

import (
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// recordCore is a Core recording its inputs, as a durable server's is, with
// one session that said hello (its output discarded).
func recordCore(b *testing.B) (*session.Core, *session.Session) {
	b.Helper()
	w, err := wheel.New(1000, wheel.Config{})
	if err != nil {
		b.Fatal(err)
	}
	c := session.New(session.Config{AdminToken: "bench", TickNs: 10_000_000, MaxFiresPerTurn: 10_000}, session.Limits{}, w, nil, nil)
	c.Record(true)
	s := c.Open()
	c.Apply(s, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "bench", Token: "bench"})[4:])
	c.TakeRecord()
	return c, s
}

// discard is a Writer whose connection takes everything at once.
func discard(*session.Session, []byte) int { return 0 }

// BenchmarkRecordAdd is the add path of a durable server inside the core:
// one add frame applied with recording on and the turn's record taken (as
// the server's commit does), then the reply flushed. The timer is
// cancelled by the next op's turn (so the wheel stays at 1k live timers: a
// steady state, not a growing slab). One op = the add's turn; the cancel's
// turn is timed too (it is the same path: decode, record, reply).
// Must be 0 allocs/op.
func BenchmarkRecordAdd(b *testing.B) {
	for _, data := range []int{0, 16} {
		b.Run(map[int]string{0: "data=0", 16: "data=16"}[data], func(b *testing.B) {
			c, s := recordCore(b)
			add := protocol.Request{Op: protocol.OpAdd, Receiver: 7, After: 100_000, Repeat: 1, Data: make([]byte, data)}
			cancel := protocol.Request{Op: protocol.OpCancel, Receiver: 7}
			var frame []byte
			const live = 1000
			turn := func(req *protocol.Request) int {
				frame = protocol.AppendRequest(frame[:0], req)
				c.Apply(s, frame[4:])
				rec, _ := c.TakeRecord()
				c.Flush(discard, nil)
				return len(rec)
			}
			for i := range uint64(live) { // the live timers, and warm buffers
				add.ID, add.Tid = i, i
				turn(&add)
			}
			var recBytes int
			b.ReportAllocs()
			b.ResetTimer()
			i := uint64(live)
			cpu0 := session.CPUTime(b)
			for b.Loop() {
				add.ID, add.Tid = i, i
				recBytes = turn(&add)
				cancel.ID, cancel.Tid = i, i-live
				turn(&cancel)
				i++
			}
			b.ReportMetric(float64(session.CPUTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(recBytes), "record-bytes")
		})
	}
}

// BenchmarkRecordAddTurn64 is a turn that applies 64 add frames (64
// callers' requests read in one event-loop turn) and takes one record for
// them. One op = one add; the 64 timers are cancelled in the next turn.
func BenchmarkRecordAddTurn64(b *testing.B) {
	c, s := recordCore(b)
	add := protocol.Request{Op: protocol.OpAdd, Receiver: 7, After: 100_000, Repeat: 1}
	cancel := protocol.Request{Op: protocol.OpCancel, Receiver: 7}
	var frame []byte
	var tid uint64
	turn := func() int {
		base := tid
		for k := range uint64(64) {
			add.ID, add.Tid = base+k, base+k
			frame = protocol.AppendRequest(frame[:0], &add)
			c.Apply(s, frame[4:])
		}
		rec, _ := c.TakeRecord()
		n := len(rec)
		c.Flush(discard, nil)
		for k := range uint64(64) {
			cancel.ID, cancel.Tid = base+k, base+k
			frame = protocol.AppendRequest(frame[:0], &cancel)
			c.Apply(s, frame[4:])
		}
		c.TakeRecord()
		c.Flush(discard, nil)
		tid += 64
		return n
	}
	for range 100 {
		turn()
	}
	var recBytes int
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := session.CPUTime(b)
	for n := 0; n < b.N; n += 64 {
		recBytes = turn()
	}
	b.ReportMetric(float64(session.CPUTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(recBytes), "record-bytes/turn")
}

// BenchmarkRecordAddRequestID is BenchmarkRecordAdd (data=0) with a
// request id on every add and cancel (a client id, as the Go and
// TypeScript clients send): each change's reply is remembered for retries
// (requestid.go), with max_request_ids at its default, so that in steady
// state every change also forgets the oldest.
func BenchmarkRecordAddRequestID(b *testing.B) {
	c, s := recordCore(b)
	add := protocol.Request{Op: protocol.OpAdd, Receiver: 7, After: 100_000, Repeat: 1, Client: 0x5eed}
	cancel := protocol.Request{Op: protocol.OpCancel, Receiver: 7, Client: 0x5eed}
	var frame []byte
	const live = 1000
	turn := func(req *protocol.Request) {
		frame = protocol.AppendRequest(frame[:0], req)
		c.Apply(s, frame[4:])
		c.TakeRecord()
		c.Flush(discard, nil)
	}
	var id uint64
	for i := range uint64(live) {
		id++
		add.ID, add.Tid = id, i
		turn(&add)
	}
	max := session.Limits{}.WithDefaults().MaxRequestIDs
	for j := uint64(0); ; j++ { // fill the memory: the steady state forgets one per change
		if n, _ := c.RequestIDs(); n >= max {
			break
		}
		id++
		fill := protocol.Request{Op: protocol.OpAdd, ID: id, Receiver: 8, Tid: j, After: 100_000, Client: 0x5eed}
		turn(&fill)
		id++
		fill = protocol.Request{Op: protocol.OpCancel, ID: id, Receiver: 8, Tid: j, Client: 0x5eed}
		turn(&fill)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := uint64(live)
	cpu0 := session.CPUTime(b)
	for b.Loop() {
		id++
		add.ID, add.Tid = id, i
		turn(&add)
		id++
		cancel.ID, cancel.Tid = id, i-live
		turn(&cancel)
		i++
	}
	b.ReportMetric(float64(session.CPUTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
