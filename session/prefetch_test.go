package session

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// snapshotBytes returns c's whole snapshot.
func snapshotBytes(c *Core) []byte {
	snap := c.Snapshot()
	defer snap.Release()
	b, _ := snap.AppendNext(nil, 0)
	return b
}

// TestPrefetchChangesNothing: Core.Prefetch, which the server calls with
// the frame after the one it applies, is a hint only: whatever bytes it
// is given (adds with and without a client id, other ops, every prefix of
// them, random bytes), it sends nothing and leaves the state, snapshot
// and memory of request ids included, byte for byte as it was; and the
// adds it was given apply as they would have.
func TestPrefetchChangesNothing(t *testing.T) {
	h := newHarness(t, nil)
	s := h.session()
	for i := range uint64(300) {
		h.apply(s, frame(protocol.Request{Op: protocol.OpAdd, ID: 10 + i, Receiver: i % 7, Tid: i, After: 50, Client: testClient}))
	}
	h.flush()
	delete(h.outs, s)
	before := snapshotBytes(h.c)

	var payloads [][]byte
	for _, req := range []protocol.Request{
		{Op: protocol.OpAdd, ID: 400, Receiver: 1, Tid: 1000, After: 5, Client: testClient},
		{Op: protocol.OpAdd, ID: 401, Receiver: 1, Tid: 1001, After: 5, Client: 0x9e3779b97f4a7c15},
		{Op: protocol.OpAdd, ID: 402, Receiver: 2, Tid: 3, After: 5},
		{Op: protocol.OpAdd, ID: 15, Receiver: 5, Tid: 5, After: 50, Client: testClient}, // a retry's key
		{Op: protocol.OpCancel, ID: 403, Receiver: 1, Tid: 1, Client: testClient},
		{Op: protocol.OpPing, ID: 404},
	} {
		p := frame(req)
		for k := range len(p) + 1 {
			payloads = append(payloads, p[:k])
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		p := make([]byte, rng.IntN(64))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		if len(p) > 1 && rng.IntN(2) == 0 {
			p[0], p[1] = 0x9e, byte(protocol.OpAdd) // [add, ...] of 14 elements
		}
		payloads = append(payloads, p)
	}
	for _, p := range payloads {
		h.c.Prefetch(p)
	}
	h.flush()
	assert.Empty(t, h.outs[s], "Prefetch sent nothing")
	require.True(t, bytes.Equal(before, snapshotBytes(h.c)), "Prefetch changed the state")

	add := frame(protocol.Request{Op: protocol.OpAdd, ID: 400, Receiver: 1, Tid: 1000, After: 5, Client: testClient})
	h.c.Prefetch(add)
	reply := h.rawReplies(s, add)
	assert.Equal(t, protocol.KindOK, decodeReply(t, reply).Kind)
	assert.Equal(t, 301, h.c.Wheel().Len())
}
