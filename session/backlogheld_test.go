package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tickwheel/tickwheel/protocol"
)

// heldBytes returns the capacity of the chunks all backlogs hold their
// events in: the bytes they really take.
func heldBytes(c *Core) (held int) {
	for _, r := range c.receivers {
		for _, ch := range r.q.chunks {
			held += cap(ch)
		}
	}
	return held
}

// TestBacklogTotalCountsHeldBytes: max_backlog_bytes_total bounds the
// bytes the backlogs really hold, the chunks their events lie in, not
// only the events' lengths (the chunks held 11% more than the budget in
// a run with 4 KiB events); and a Core restored from a snapshot holds
// its backlogs in the same chunks, so it goes on dropping the same events.
func TestBacklogTotalCountsHeldBytes(t *testing.T) {
	const total = 200_000
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxBacklogBytesTotal, l.MaxBacklogBytes = total, 1<<20 })
	a := h.client("a")
	for rid := uint64(1); rid <= 5; rid++ {
		for tid := uint64(1); tid <= 3; tid++ {
			a.add(protocol.Request{Receiver: rid, Tid: tid, After: 1, Every: 1, Data: make([]byte, 3000+int(rid*tid*37))})
		}
	}
	for range 40 {
		h.c.Advance(h.c.Now()+1, 0)
		h.flush()
	}
	require.Positive(t, h.c.droppedTotal, "the total was reached")
	assert.LessOrEqual(t, heldBytes(h.c), total, "the backlogs' chunks hold more than max_backlog_bytes_total")
	assert.Equal(t, uint64(heldBytes(h.c)), h.c.backlogHeld)

	c2 := restoreCopy(t, h.c)
	assert.Equal(t, heldBytes(h.c), heldBytes(c2), "the restored backlogs' chunks")
	assert.Equal(t, h.c.backlogHeld, c2.backlogHeld)
	for range 20 {
		h.c.Advance(h.c.Now()+1, 0)
		c2.Advance(c2.Now()+1, 0)
	}
	h.flush()
	assert.Equal(t, h.c.droppedTotal, c2.droppedTotal, "the restored Core dropped other events")
	assert.Equal(t, h.c.Receivers(), c2.Receivers())
}

// TestFrameQueueLayoutRestore: restore rebuilds the chunks a queue held
// after pushes and pops, and refuses frames that do not fit the layout.
func TestFrameQueueLayoutRestore(t *testing.T) {
	var q frameQueue
	for i := range 60 {
		q.push(protocol.AppendFire(nil, &protocol.Fire{Receiver: 1, Seq: uint64(i), Data: make([]byte, 100*(i%7))}))
	}
	for range 17 {
		q.pop()
	}
	caps, off := q.layout()
	var r frameQueue
	require.True(t, r.restore(caps, off, q.frames(43)))
	assert.Equal(t, q.held, r.held)
	assert.Equal(t, q.frames(43), r.frames(43))
	rc, roff := r.layout()
	assert.Equal(t, caps, rc)
	assert.Equal(t, off, roff)
	var bad frameQueue
	assert.False(t, bad.restore([]int{256}, 0, q.frames(43)), "43 frames in 256 bytes")
	assert.Zero(t, bad.held)
}

// layout returns the chunks' capacities and where the first frame starts
// in the first (for a snapshot).
func (q *frameQueue) layout() (caps []int, off int) {
	caps = make([]int, len(q.chunks))
	for i, c := range q.chunks {
		caps[i] = cap(c)
	}
	return caps, q.off
}
