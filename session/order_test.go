package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestSameTickOrder: one receiver's timers due on the same tick fire in the
// order they were added (across receivers, in rounds: fair_test.go); a replace counts as a new add (it moves to the end of that
// order), while pause and resume keep a timer's place. list stays in tid
// order whatever the firing order.
func TestSameTickOrder(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("order")
	c.bind(1, false)
	for _, tid := range []uint64{3, 1, 2} {
		c.add(protocol.Request{Receiver: 1, Tid: tid, After: 10})
	}
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 10, Replace: true})
	c.uints(protocol.Request{Op: protocol.OpPause, Receiver: 1, Tid: 3})
	c.uints(protocol.Request{Op: protocol.OpResume, Receiver: 1, Tid: 3})
	var listed []uint64
	for _, tm := range c.list(1) {
		listed = append(listed, tm.Tid)
	}
	assert.Equal(t, []uint64{1, 2, 3}, listed, "list is in tid order")
	c.ff(10)
	var fired []uint64
	for _, f := range c.fires() {
		require.Equal(t, uint64(start+10), f.Tick)
		fired = append(fired, f.Tid)
	}
	assert.Equal(t, []uint64{3, 2, 1}, fired, "1 was replaced: last; 3 was paused and resumed: kept its place")
}
