package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// flushStuck flushes like h.flush, to connections whose sockets take
// nothing: every byte handed over stays buffered (held, per session).
func (h *harness) flushStuck(held map[*Session]int) {
	h.c.Flush(func(s *Session, out []byte) int {
		if h.rep != nil {
			h.rep.wrote(s, out)
		}
		held[s] += len(out)
		return held[s]
	}, nil)
	if h.rep != nil {
		h.rep.sync()
	}
}

// TestDroppedNoticeLostWithConnection: a plain-mode session that stops
// reading gets dropped notices for the events its receiver's backlog
// could not keep; when its connection closes before those notices left,
// the seqs they announced go to the receiver's dropped count with the
// events lost in the same bytes, so the next bind accounts for every seq
// (they were reported nowhere: 213,449 seqs in one run).
func TestDroppedNoticeLostWithConnection(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklog, l.MaxOutbound = 2, 300 })
	a := h.client("a")
	backlog, dropped := a.bind(1, false)
	require.Zero(t, backlog+dropped)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1, Repeat: 50})
	held := map[*Session]int{}
	for range 50 {
		h.c.Advance(h.c.Now()+1, 0)
		h.rep.sync()
		h.flushStuck(held)
	}
	require.Equal(t, 2, h.c.Receivers()[0].Backlog, "the backlog keeps the last two")
	var notices int
	for _, f := range a.s.inflight {
		if f.dropped > 0 {
			notices++
		}
	}
	require.Positive(t, notices, "dropped notices went to the stalled connection")
	h.c.Close(a.s, held[a.s])
	h.flush()

	b := h.client("b")
	backlog, dropped = b.bind(1, false)
	assert.Equal(t, uint64(2), backlog)
	assert.Equal(t, uint64(48), dropped, "every seq not in the backlog is reported: the lost events and the drops announced to the closed connection")
	b.ping()
	fs := b.fires()
	require.Len(t, fs, 2)
	assert.Equal(t, []uint64{49, 50}, []uint64{fs[0].Seq, fs[1].Seq})
}
