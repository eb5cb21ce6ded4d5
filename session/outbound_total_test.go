package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tickwheel/tickwheel/protocol"
)

// TestOutboundTotalBoundsStalledConnections: sessions whose connections
// take nothing hold at most max_outbound_total bytes of events together
// (before it, each held max_outbound: N sessions held N × max_outbound),
// the rest waits in their backlogs, and a session that reads keeps being
// served while they hold it.
func TestOutboundTotalBoundsStalledConnections(t *testing.T) {
	const outbound, total = 4000, 6000
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutbound, l.MaxOutboundTotal = outbound, total })
	var stuck []*client
	for i := range 4 {
		c := h.client("stuck")
		rid := uint64(10 + i)
		c.bind(rid, false)
		c.add(protocol.Request{Receiver: rid, Tid: 1, After: 1, Every: 1, Repeat: 200, Data: make([]byte, 100)})
		stuck = append(stuck, c)
	}
	reader := h.client("reader")
	reader.bind(1, false)
	reader.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1, Repeat: 200, Data: make([]byte, 100)})

	held := map[*Session]int{}
	var read int
	for range 200 {
		h.c.Advance(h.c.Now()+1, 0)
		h.c.PumpAll(func(s *Session) int { return held[s] })
		h.c.Flush(func(s *Session, out []byte) int {
			if h.rep != nil {
				h.rep.wrote(s, out)
			}
			if s == reader.s {
				read += len(out)
				return 0
			}
			held[s] += len(out)
			return held[s]
		}, nil)
		if h.rep != nil {
			h.rep.sync()
		}
	}
	var sum int
	for _, c := range stuck {
		sum += held[c.s]
	}
	frame := len(protocol.AppendFire(nil, &protocol.Fire{Receiver: 10, Tid: 1, Data: make([]byte, 100), Seq: 200, Tick: 1 << 40}))
	assert.LessOrEqual(t, sum, total+4*frame, "the stalled connections hold max_outbound_total (and a frame each)")
	assert.Greater(t, sum, total-4*frame)
	var backlog int
	for _, r := range h.c.Receivers() {
		backlog += r.Backlog
	}
	require.Positive(t, backlog, "the rest waits in the backlogs")
	assert.Greater(t, read, 150*frame, "the reader got its events while the others held the total")
}
