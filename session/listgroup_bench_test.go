package session

import (
	"fmt"
	"testing"

	"github.com/tickwheel/tickwheel/protocol"
)

// BenchmarkListGroupPage measures one list_group page (inside the Core,
// without sockets: finding the page's keys, the copy, the encoding) of a
// group of 1M timers without data spread over 10 receivers, from the
// group's start and from its middle, in pages of 1000 (max_list_page)
// and of 100, two ways in the same run: keys=walk serves the page by a
// walk of the group (how every page was served before groupOrder, and how
// a group below groupOrderMin still is), keys=ordered from the group's
// ordered keys. It reports the work the Core counted for a page
// (work/page) and the ordered keys' memory per member (ord-B/member).
func BenchmarkListGroupPage(b *testing.B) {
	const timers = 1_000_000
	h := newHarness(b, func(_ *Config, l *Limits) { l.MaxTimersPerReceiver = timers })
	s := h.session()
	var frame []byte
	for i := range uint64(timers) {
		frame = protocol.AppendRequest(frame[:0], &protocol.Request{Op: protocol.OpAdd, ID: i, Receiver: 1 + i%10, Tid: i, After: 1_000_000, Repeat: 1, Group: 9})
		h.c.Apply(s, frame[4:])
	}
	h.take(s)
	gr := h.c.groups.get(9)
	ord := gr.ord
	for _, keys := range []string{"walk", "ordered"} {
		for _, limit := range []uint64{1000, 100} {
			for _, from := range [][2]uint64{{0, 0}, {5, timers / 2}} {
				b.Run(fmt.Sprintf("keys=%s/limit=%d/from=%d.%d", keys, limit, from[0], from[1]), func(b *testing.B) {
					if keys == "walk" {
						gr.ord = nil
						defer func() { gr.ord = ord }()
					}
					list := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpListGroup, Group: 9, FromReceiver: from[0], FromTid: from[1], Limit: limit})[4:]
					b.ReportAllocs()
					work := 0
					for b.Loop() {
						s.out = s.out[:0]
						w := h.c.Work()
						h.c.Apply(s, list)
						work = h.c.Work() - w
					}
					b.ReportMetric(float64(work), "work/page")
					b.ReportMetric(float64(ord.bytes())/timers, "ord-B/member")
				})
			}
		}
	}
}

// BenchmarkBulkChunkUnordered is BenchmarkBulkChunk's cancel_group with
// no group keeping its keys in order (as before groupOrder): against
// BenchmarkBulkChunk/cancel_group in the same run, what keeping them
// costs a group's cancel (each member's removal from the ordered keys).
func BenchmarkBulkChunkUnordered(b *testing.B) {
	bulkChunk(b, protocol.OpCancelGroup, 1<<30)
}
