package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// pipeline encodes reqs into one buffer, numbering them from c.id+1.
func (c *rawClient) pipeline(reqs ...protocol.Request) (buf []byte, ids []uint64) {
	for _, r := range reqs {
		c.id++
		r.ID = c.id
		ids = append(ids, r.ID)
		buf = protocol.AppendRequest(buf, &r)
	}
	return buf, ids
}

// TestPipelining: many requests written at once are answered in order.
func TestPipelining(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv)
	const n = 500
	reqs := []protocol.Request{{Op: protocol.OpHello, Version: protocol.Version, Name: "pipe"}, {Op: protocol.OpBind, Receiver: 1}}
	for i := range uint64(n) {
		switch i % 5 {
		case 0:
			reqs = append(reqs, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: i, After: 1 + i})
		case 1:
			reqs = append(reqs, protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: i - 1})
		case 2:
			reqs = append(reqs, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: i - 2, After: 1}) // exists
		case 3:
			reqs = append(reqs, protocol.Request{Op: protocol.OpPing})
		case 4:
			reqs = append(reqs, protocol.Request{Op: 99}) // unknown op
		}
	}
	buf, ids := c.pipeline(reqs...)
	c.write(buf)
	for i, id := range ids {
		m := c.reply(id)
		if i < 2 {
			require.Equal(t, protocol.KindOK, m.Kind)
			continue
		}
		k := uint64(i - 2)
		switch k % 5 {
		case 0:
			assert.Equal(t, []uint64{start + 1 + k}, okUints(t, protocol.OpAdd, m))
		case 1:
			require.Equal(t, protocol.KindOK, m.Kind)
			var tm protocol.Timer
			require.NoError(t, protocol.DecodeTimer(m.Result, &tm))
			assert.Equal(t, k-1, tm.Tid)
		case 2:
			assert.Equal(t, protocol.CodeExists, m.Code)
		case 3:
			assert.Equal(t, []uint64{start}, okUints(t, protocol.OpPing, m))
		case 4:
			assert.Equal(t, protocol.CodeUnknownOp, m.Code)
		}
	}
	assert.Len(t, c.list(1), n/5)

}

// TestSplitFrames: requests written one byte per write are reassembled, and
// so are frames cut at every position. (Whether the server reads a given cut
// on its own depends on timing; the test passes either way when the server
// is right, and with dozens of cuts it catches one that drops a partial frame.)
func TestSplitFrames(t *testing.T) {
	srv := startServer(t, nil)
	c := helloClient(t, srv, "split")
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5, Data: []byte("some data")})
	for range 10 {
		buf, ids := c.pipeline(protocol.Request{Op: protocol.OpPing}, protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 1})
		for _, b := range buf {
			c.write([]byte{b})
		}
		assert.Equal(t, []uint64{start}, okUints(t, protocol.OpPing, c.reply(ids[0])))
		assert.Equal(t, protocol.KindOK, c.reply(ids[1]).Kind)
	}
	c.id = 1000 // ids 1001.. all take 3 bytes: every frame has the same length
	n := len(protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: c.id, Receiver: 2, Tid: 1, After: 1, Data: make([]byte, 300), Replace: true}))
	var add []byte
	for cut := 1; cut < n; cut++ {
		c.id++
		req := protocol.Request{Op: protocol.OpAdd, ID: c.id, Receiver: 2, Tid: 1, After: 1, Data: make([]byte, 300), Replace: true}
		add = protocol.AppendRequest(add[:0], &req)
		require.Len(t, add, n)
		c.write(add[:cut])
		c.write(add[cut:])
		assert.Equal(t, []uint64{start + 1}, okUints(t, protocol.OpAdd, c.reply(c.id)))
	}
}

// TestRequestsArrivingDuringFastForward: requests that arrive in later
// writes while a fast-forward spanning several loop turns is in progress are
// kept, and answered after it in order.
func TestRequestsArrivingDuringFastForward(t *testing.T) {
	srv := startServer(t, func(c *Config) { c.MaxFiresPerTurn = 1 })
	c := helloClient(t, srv, "ff")
	c.bind(1, false)
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 1}) // every tick, forever
	ffID := c.send(protocol.Request{Op: protocol.OpFastForward, Ticks: 300})
	pingID := c.send(protocol.Request{Op: protocol.OpPing})
	addID := c.send(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 2, After: 1, Repeat: 1})
	getID := c.send(protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 2})
	assert.Equal(t, []uint64{start + 300, 300}, okUints(t, protocol.OpFastForward, c.reply(ffID)))
	assert.Len(t, c.fires(), 300, "every event before the fast-forward's reply")
	assert.Equal(t, []uint64{start + 300}, okUints(t, protocol.OpPing, c.reply(pingID)))
	assert.Equal(t, []uint64{start + 301}, okUints(t, protocol.OpAdd, c.reply(addID)))
	assert.Equal(t, protocol.KindOK, c.reply(getID).Kind)
	assert.Empty(t, c.events)
}

// TestBurstYieldsToOtherSessions: a burst bounded by max_fires_per_turn
// proceeds in turns between rounds of I/O, so another session is served
// while it is in progress, not after it (gnet's task queue, which runs tasks
// queued by tasks before polling again, once made a burst stall everyone).
func TestBurstYieldsToOtherSessions(t *testing.T) {
	const n, perTurn = 50000, 10
	srv := startServer(t, func(c *Config) { c.MaxFiresPerTurn = perTurn })
	a := helloClient(t, srv, "burst")
	b := helloClient(t, srv, "other")
	a.bind(1, false)
	var pipe []byte
	first := a.id + 1
	for tid := range uint64(n) {
		a.id++
		pipe = protocol.AppendRequest(pipe, &protocol.Request{Op: protocol.OpAdd, ID: a.id, Receiver: 1, Tid: tid, After: 1, Repeat: 1})
	}
	a.write(pipe)
	for id := first; id <= a.id; id++ {
		require.Equal(t, protocol.KindOK, a.reply(id).Kind)
	}
	ffID := a.send(protocol.Request{Op: protocol.OpFastForward, Ticks: 1})

	// Once the burst has begun, b's requests are answered while it runs:
	// b sees it progress, not only its first turn (run with the request)
	// and then its end.
	var during []uint64
	for {
		s := b.stats()
		if s.FiredTotal == n {
			break
		}
		if s.FiredTotal > 0 && (len(during) == 0 || s.FiredTotal > during[len(during)-1]) {
			if during = append(during, s.FiredTotal); len(during) == 3 {
				break
			}
		}
	}
	assert.Len(t, during, 3, "b saw the burst progress in fewer than 3 steps (%v of %d): it was not served between turns", during, n)
	assert.Equal(t, []uint64{start + 1, n}, okUints(t, protocol.OpFastForward, a.reply(ffID)))
	assert.Len(t, a.fires(), n)
}
