package server

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// listPage calls list and returns the page and next, failing on an error.
func (c *rawClient) listPage(receiver, from, limit uint64) ([]protocol.Timer, uint64) {
	c.t.Helper()
	m := c.call(protocol.Request{Op: protocol.OpList, Receiver: receiver, FromTid: from, Limit: limit})
	require.Equal(c.t, protocol.KindOK, m.Kind, "list: %s %s", m.Code, m.Text)
	ts, next, err := protocol.DecodeListPage(m.Result, nil)
	require.NoError(c.t, err)
	return ts, next
}

// TestListOverTCP: list's pages over TCP (the paging rules are tested on
// the Core, in session/): 250 timers added pipelined come back in pages of
// max_list_page, next naming the first tid left out; a request in the form
// from before paging gets the first page. Hello reports the list limits
// configured.
func TestListOverTCP(t *testing.T) {
	srv := startServer(t, func(c *Config) { c.Limits.MaxListPage, c.Limits.MaxListBytes = 100, 5000 })
	c := helloClient(t, srv, "c")
	assert.Equal(t, uint64(100), c.hello.Limits.MaxListPage, "hello reports the configured limits")
	assert.Equal(t, uint64(5000), c.hello.Limits.MaxListBytes)
	var buf []byte
	first := c.id + 1
	for tid := range uint64(250) {
		c.id++
		buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpAdd, ID: c.id, Receiver: 1, Tid: tid + 10, After: 5})
	}
	c.write(buf)
	for id := first; id <= c.id; id++ {
		require.Equal(t, protocol.KindOK, c.reply(id).Kind)
	}
	var got []uint64
	for from, pages := uint64(0), 0; ; pages++ {
		require.Less(t, pages, 3)
		ts, next := c.listPage(1, from, math.MaxUint64)
		for _, tm := range ts {
			got = append(got, tm.Tid)
		}
		if next == 0 {
			break
		}
		assert.Len(t, ts, 100)
		assert.Equal(t, ts[len(ts)-1].Tid+1, next)
		from = next
	}
	require.Len(t, got, 250)
	assert.Equal(t, uint64(10), got[0])
	assert.Equal(t, uint64(259), got[249])

	// [7, id, receiver], as sent by a client from before paging (an id
	// below 128 fits a byte).
	c.id = 100
	c.write(frame([]byte{0x93, 0x07, byte(c.id), 0x01}))
	m := c.reply(c.id)
	require.Equal(t, protocol.KindOK, m.Kind)
	old, err := protocol.DecodeList(m.Result, nil)
	require.NoError(t, err)
	assert.Len(t, old, 100)
}

// TestListWalkOverTCP: with max_list_walk_per_turn 50, the first page of
// a 3,000-timer receiver is gathered over about 60 turns; a ping pipelined
// behind the list in the same write is answered after it (the session is
// not read meanwhile), and the page is the receiver's first 1,000 tids.
func TestListWalkOverTCP(t *testing.T) {
	srv := startServer(t, func(c *Config) { c.MaxListWalkPerTurn = 50 })
	c := helloClient(t, srv, "c")
	var buf []byte
	first := c.id + 1
	for tid := range uint64(3000) {
		c.id++
		buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpAdd, ID: c.id, Receiver: 1, Tid: 3000 - tid, After: 100_000})
	}
	c.write(buf)
	for id := first; id <= c.id; id++ {
		require.Equal(t, protocol.KindOK, c.reply(id).Kind)
	}
	list, ping := c.id+1, c.id+2
	c.id += 2
	buf = protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpList, ID: list, Receiver: 1})
	buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpPing, ID: ping})
	c.write(buf)
	m := c.reply(list) // (fails when the ping's reply comes first)
	require.Equal(t, protocol.KindOK, m.Kind, "list: %s %s", m.Code, m.Text)
	ts, next, err := protocol.DecodeListPage(m.Result, nil)
	require.NoError(t, err)
	require.Len(t, ts, 1000)
	for i, tm := range ts {
		require.Equal(t, uint64(i+1), tm.Tid)
	}
	assert.Equal(t, uint64(1001), next)
	assert.Equal(t, protocol.KindOK, c.reply(ping).Kind)
}
