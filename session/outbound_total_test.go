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

// TestReaderKeepsUpWhileOthersHoldTheTotal: four sessions that never read
// hold max_outbound_total, and their backlogs fill max_backlog_bytes_total;
// a reader whose connection takes everything each turn, with bursts of
// 100 KB a turn (more than outboundFloor), still gets every event and no
// drop. Before readerFloor it got 6,443 of its 10,000 events: the rest of
// each burst went to its backlog, where the full total dropped them.
func TestReaderKeepsUpWhileOthersHoldTheTotal(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) {
		l.MaxOutbound, l.MaxOutboundTotal, l.MaxBacklogBytesTotal = 1<<20, 256<<10, 1<<20
		l.MaxBacklogBytes, l.MaxBacklog = 1<<20, 100_000
	})
	fire := func(c *client, rid uint64, timers int) {
		for tid := range timers {
			c.add(protocol.Request{Receiver: rid, Tid: uint64(tid + 1), After: 1, Every: 1, Data: make([]byte, 1000)})
		}
	}
	for i := range 4 {
		c := h.client("stuck")
		rid := uint64(10 + i)
		c.bind(rid, false)
		fire(c, rid, 50)
	}
	reader := h.client("reader")
	reader.bind(1, false)
	fire(reader, 1, 100)

	held := map[*Session]int{}
	var events, dropped int
	for range 100 {
		h.c.Advance(h.c.Now()+1, 0)
		h.c.PumpAll(func(s *Session) int { return held[s] })
		h.c.Flush(func(s *Session, out []byte) int {
			if h.rep != nil {
				h.rep.wrote(s, out)
			}
			if s != reader.s {
				held[s] += len(out)
				return held[s]
			}
			for len(out) > 0 {
				body, n, err := protocol.SplitFrame(out, 1<<20)
				require.NoError(t, err)
				var m protocol.Message
				require.NoError(t, protocol.DecodeMessage(body, &m))
				switch m.Kind {
				case protocol.KindFire:
					events++
				case protocol.KindDropped:
					dropped += int(m.Last - m.First + 1)
				}
				out = out[n:]
			}
			return 0
		}, nil)
		if h.rep != nil {
			h.rep.sync()
		}
	}
	assert.Zero(t, dropped, "the reader's events were dropped")
	assert.Equal(t, 100*100, events, "the reader got every event of its 100 turns")
}
