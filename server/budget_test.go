package server

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// The byte budgets: timer data in total, backlog bytes per receiver and in
// total, requests held while replies wait, hello names.

func TestLimitMaxDataTotal(t *testing.T) {
	srv := startServer(t, func(c *Config) { c.Limits.MaxData = 512; c.Limits.MaxDataTotal = 1000 })
	c := helloClient(t, srv, "l")
	d := bytes.Repeat([]byte{'d'}, 400)
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5, Data: d})
	c.add(protocol.Request{Receiver: 1, Tid: 2, After: 1, Repeat: 1, Data: d})
	text := c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 3, After: 5, Data: d})
	assert.Contains(t, text, "max_data_total (1000 bytes)")
	c.add(protocol.Request{Receiver: 1, Tid: 3, After: 5}) // no data: fine
	// A replace counts the data it frees.
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5, Data: d, Replace: true})
	// Room again once data goes: fired for the last time, or cancelled.
	c.ff(1)
	c.add(protocol.Request{Receiver: 1, Tid: 4, After: 5, Data: d})
	c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 5, After: 5, Data: d})
	c.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: 4})
	c.add(protocol.Request{Receiver: 1, Tid: 5, After: 5, Data: d})
}

// eventSize is the frame size of a fire event for receiver 1 with tid < 128,
// a small tick count and n bytes of data.
func eventSize(t *testing.T, n int) int {
	return len(protocol.AppendFire(nil, &protocol.Fire{Receiver: 1, Tid: 1, Tick: start + 1, Fired: 1, Repeat: 1, Last: true, Data: make([]byte, n), Seq: 1}))
}

func TestLimitMaxBacklogBytes(t *testing.T) {
	size := eventSize(t, 1000)
	srv := startServer(t, func(c *Config) { c.Limits.MaxData = 1024; c.Limits.MaxBacklogBytes = 5 * size })
	a := helloClient(t, srv, "admin")
	for tid := range uint64(10) {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1, Data: make([]byte, 1000)})
	}
	a.ff(1)
	assert.Equal(t, uint64(5), a.stats().BacklogEvents)
	c := helloClient(t, srv, "c")
	backlog, dropped := c.bind(1, false)
	assert.Equal(t, uint64(5), backlog)
	assert.Equal(t, uint64(5), dropped)
	fs := c.readFires(5)
	assert.Equal(t, uint64(6), fs[0].Seq, "the oldest were dropped")
}

// TestLimitMaxBacklogBytesTotal: the total counts the bytes the backlogs
// hold, the chunks their events lie in: a backlog's first chunk holds one
// event of size bytes, the next two (2 × size), the next four (4 ×
// size); receiver 1's five events take 7 × size, receiver 2's first
// event a chunk of size, and its next would need a chunk of 2 × size.
func TestLimitMaxBacklogBytesTotal(t *testing.T) {
	size := eventSize(t, 1000)
	srv := startServer(t, func(c *Config) { c.Limits.MaxData = 1024; c.Limits.MaxBacklogBytesTotal = 8 * size })
	a := helloClient(t, srv, "admin")
	for tid := range uint64(5) {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 1, Repeat: 1, Data: make([]byte, 1000)})
	}
	for tid := range uint64(3) {
		a.add(protocol.Request{Receiver: 2, Tid: tid, After: 2, Repeat: 1, Data: make([]byte, 1000)})
	}
	a.ff(2) // receiver 1's five fit; of receiver 2's three only the newest
	st := a.stats()
	assert.Equal(t, uint64(6), st.BacklogEvents)
	assert.Equal(t, uint64(2), st.DroppedTotal)
	c := helloClient(t, srv, "c")
	backlog, dropped := c.bind(2, false)
	assert.Equal(t, uint64(1), backlog)
	assert.Equal(t, uint64(2), dropped)
	assert.Equal(t, uint64(3), c.readFires(1)[0].Seq)
	backlog, dropped = c.bind(1, false)
	assert.Equal(t, uint64(5), backlog)
	assert.Zero(t, dropped)
}

// A client that pipelines requests without reading the replies is not read
// once max_outbound bytes wait for it, and is closed once it has sent
// max_inbound bytes more; other sessions are served meanwhile.
func TestLimitMaxInbound(t *testing.T) {
	srv := startServer(t, func(c *Config) {
		c.Limits.MaxFrame = 4096
		c.Limits.MaxData = 1024
		c.Limits.MaxOutbound = 64 << 10
		c.Limits.MaxInbound = 64 << 10
	})
	a := helloClient(t, srv, "admin")
	for tid := range uint64(200) {
		a.add(protocol.Request{Receiver: 1, Tid: tid, After: 100, Data: make([]byte, 1000)})
	}
	greedy := dialSmallBuffer(t, srv, 4096)
	greedy.sayHello("greedy", "")
	list := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpList, Receiver: 1})
	batch := bytes.Repeat(list, 1000) // ~32 MB of replies asked for with ~10 KB
	go func() {
		for range 100 {
			if _, err := greedy.conn.Write(batch); err != nil {
				return
			}
		}
	}()
	waitUntil(t, "the greedy session to be closed", func() bool {
		a.ping() // served meanwhile
		return a.stats().Sessions == 1
	})
	require.True(t, greedy.closed())
}

func TestLimitMaxName(t *testing.T) {
	srv := startServer(t, nil)
	c := helloClient(t, srv, "short")
	long := string(bytes.Repeat([]byte{'n'}, 257))
	text := c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: long, Token: testAdminToken})
	assert.Contains(t, text, "max_name (256 bytes)")
}
