package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestOutboxTotalRoomOnEphemeralClose: a session whose ephemeral
// receiver's outbox fills max_outbox_total closes; the outbox is dropped,
// and the firing another receiver had waiting for that room goes out at
// once (found by FuzzCore: it waited for an ack that could never come).
func TestOutboxTotalRoomOnEphemeralClose(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxOutboxTotal = 1 })
	a, b := h.client("a"), h.client("b")
	b.uints(protocol.Request{Op: protocol.OpBind, Receiver: 2, Ack: true, Ephemeral: true})
	b.add(protocol.Request{Receiver: 2, Tid: 1, After: 1, Repeat: 1})
	a.bindAck(1)
	a.add(protocol.Request{Receiver: 1, Tid: 1, After: 2, Repeat: 1})
	a.ff(2)
	a.ping()
	require.Empty(t, a.fires(), "receiver 1's firing waits: receiver 2's unacknowledged event fills the total")
	require.Equal(t, uint64(1), h.c.parkedTotal)

	b.close() // receiver 2's outbox goes with its ephemeral binding
	a.ping()
	fs := a.fires()
	require.Len(t, fs, 1, "the waiting firing goes out once the total has room")
	assert.Equal(t, uint64(1), fs[0].Receiver)
	assert.Zero(t, h.c.parkedTotal)
}
