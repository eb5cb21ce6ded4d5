package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// One connection's pipelined list requests over large receivers (each a
// walk of 25,000 timers) do not hold the loop: another session's ping is answered while they are still
// being worked through (each turn handles about readBudget of them).
func TestPipelinedListsYield(t *testing.T) {
	timers := 50_000
	if testing.Short() {
		timers = 20_000
	}
	srv := startServer(t, nil)
	admin := helloClient(t, srv, "admin")
	var adds []byte
	for tid := range timers { // half each to receivers 1 and 2
		adds = protocol.AppendRequest(adds, &protocol.Request{Op: protocol.OpAdd, ID: uint64(tid + 1), Receiver: uint64(1 + tid%2), Tid: uint64(tid), After: 100})
	}
	admin.write(adds)
	for id := range timers {
		require.Equal(t, protocol.KindOK, admin.reply(uint64(id+1)).Kind)
	}

	greedy := helloClient(t, srv, "greedy")
	other := helloClient(t, srv, "other")
	const lists = 1000
	start := time.Now()
	// Lists of two large receivers in turn: each walks its receiver's
	// timers (the wheel keeps the sorted tids of one receiver only, which
	// makes pages of one receiver cheap).
	var pair []byte
	for r := range uint64(2) {
		pair = protocol.AppendRequest(pair, &protocol.Request{Op: protocol.OpList, ID: 1, Receiver: 1 + r, Limit: 1})
	}
	greedy.write(bytes.Repeat(pair, lists/2))
	other.ping()
	ping := time.Since(start)
	for range lists {
		m, err := greedy.read()
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind)
	}
	all := time.Since(start)
	t.Logf("ping answered after %v; the %d lists took %v", ping, lists, all)
	assert.Less(t, ping, all/2, "the ping waited for the other connection's lists")
}

// A frame trickling in a byte at a time is not copied on every byte, and a
// session that may not read is not copied at all: the server does no work
// per arrival beyond the check of its header.
func TestTrickledFrameServed(t *testing.T) {
	srv := startServer(t, nil)
	c := helloClient(t, srv, "trickle")
	pad := make([]byte, 2000)
	payload := append([]byte{0x93, byte(protocol.OpPing), 0x05, 0xc5}, byte(len(pad)>>8), byte(len(pad)))
	f := frame(append(payload, pad...))
	for i := range f {
		c.write(f[i : i+1])
	}
	assert.Equal(t, protocol.KindOK, c.reply(5).Kind)
}

// A client that reads its replies but pipelines requests faster than its
// turns of work handle them is held to max_inbound too: closed, not buffered
// without bound.
func TestLimitMaxInboundWhileDeferred(t *testing.T) {
	srv := startServer(t, func(c *Config) {
		c.Limits.MaxFrame = 4096
		c.Limits.MaxData = 1024
		c.Limits.MaxInbound = 64 << 10
	})
	admin := helloClient(t, srv, "admin")
	var adds []byte
	for tid := range 40_000 { // 20k timers each for receivers 1 and 2
		adds = protocol.AppendRequest(adds, &protocol.Request{Op: protocol.OpAdd, ID: uint64(tid + 1), Receiver: uint64(1 + tid%2), Tid: uint64(tid), After: 100})
	}
	admin.write(adds)
	for id := range 40_000 {
		require.Equal(t, protocol.KindOK, admin.reply(uint64(id+1)).Kind)
	}
	greedy := helloClient(t, srv, "greedy")
	go func() { // reads everything, so it is never blocked on its replies
		for {
			if _, err := greedy.read(); err != nil {
				return
			}
		}
	}()
	// Lists of two receivers in turn: a page of the receiver last paged
	// is cheap (wheel.ListPage keeps its sorted tids), so each list of
	// the other one walks its 20k timers.
	two := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpList, ID: 1, Receiver: 1, Limit: 1})
	two = protocol.AppendRequest(two, &protocol.Request{Op: protocol.OpList, ID: 2, Receiver: 2, Limit: 1})
	list := bytes.Repeat(two, 5_000)
	for range 100 { // up to ~7 MB of requests, each walking 20k timers
		if _, err := greedy.conn.Write(list); err != nil {
			break // closed
		}
	}
	waitUntil(t, "the greedy session to be closed", func() bool { return admin.stats().Sessions == 1 })
}

// A receiver's timer due on the tick after 20,000 timers of another
// receiver is delivered among the first events of the burst, through a
// real connection: the first loop turn after the one that reaches its
// tick fires it (the wheel's rotation while a backlog drains), not the
// 200th, after all 20,000 (issue 24 item 12, the next tick: 1M timers on
// one cron minute held an unrelated receiver's timer hundreds of ms).
// Both receivers are bound on one connection, so the order of their
// events on it is the order they were written in; every event still comes
// once, each receiver's in order, with the tick it was due at.
func TestNextTickOtherReceiverEarly(t *testing.T) {
	const n, perTurn = 20_000, 100
	srv := startServer(t, func(c *Config) { c.MaxFiresPerTurn = perTurn })
	c := helloClient(t, srv, "game")
	c.bind(1, false)
	c.bind(2, false)
	var adds []byte
	first := c.id + 1
	for tid := range uint64(n) {
		c.id++
		adds = protocol.AppendRequest(adds, &protocol.Request{Op: protocol.OpAdd, ID: c.id, Receiver: 1, Tid: tid, After: 100, Repeat: 1})
	}
	c.write(adds)
	for id := first; id <= c.id; id++ {
		require.Equal(t, protocol.KindOK, c.reply(id).Kind)
	}
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 101, Repeat: 1})

	begin := time.Now()
	ffID := c.send(protocol.Request{Op: protocol.OpFastForward, Ticks: 101})
	bAt, next := -1, uint64(0)
	var bWait time.Duration
	for i := 0; ; i++ {
		m, err := c.read()
		require.NoError(t, err)
		if m.Kind != protocol.KindFire {
			require.Equal(t, ffID, m.ID)
			assert.Equal(t, []uint64{start + 101, n + 1}, okUints(t, protocol.OpFastForward, m))
			require.Equal(t, n+1, i, "events before the fast-forward's reply")
			break
		}
		f := m.Fire
		if f.Receiver == 2 {
			require.Equal(t, -1, bAt, "receiver 2's event came twice")
			bAt, bWait = i, time.Since(begin)
			assert.Equal(t, uint64(start+101), f.Tick)
			continue
		}
		require.Equal(t, next, f.Tid, "receiver 1's events in add order, each once")
		require.Equal(t, uint64(start+100), f.Tick)
		next++
	}
	all := time.Since(begin)
	t.Logf("receiver 2's event was event %d of %d (about turn %d of %d), after %v; the burst took %v", bAt+1, n+1, bAt/perTurn+1, n/perTurn, bWait, all)
	assert.Equal(t, uint64(n), next)
	assert.LessOrEqual(t, bAt, 2*perTurn, "receiver 2's event waited for more than the turn after its tick's")
}
