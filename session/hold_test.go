package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestHeldLogKeepsHelloAndBindGoing: while the server cannot write the log
// (it calls HoldReplied after every turn), a hello and a bind are answered
// at once; the acknowledged-mode event a bind delivers, and an add's reply,
// wait for the log (ReleaseHeld), in stream order after the bind's reply.
// The harness's replica checks that the partial writes replay byte for
// byte. Before issue 24 item 4 the hello's and the bind's replies were held
// with the rest, so no client could reconnect while the disk was full.
func TestHeldLogKeepsHelloAndBindGoing(t *testing.T) {
	h := newHarness(t, nil)
	h.c.Record(true)
	admin := h.session()
	h.do(admin, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 1})
	h.c.Advance(start+1, 0)
	h.flush() // receiver 1, unbound, has one event waiting

	// Every turn from here is held, as commit does while the log fails.
	turn := func(s *Session, req protocol.Request) []protocol.Message {
		h.send(s, req) // its record is taken (replica.sync)
		h.c.HoldReplied()
		return h.take(s)
	}
	s := h.c.Open()
	ms := turn(s, protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version, Name: "late", Token: testAdminToken})
	require.Len(t, ms, 1, "the hello is answered while the log cannot be written")
	assert.Equal(t, protocol.KindOK, ms[0].Kind)

	ms = turn(s, protocol.Request{Op: protocol.OpBind, ID: 2, Receiver: 1, Ack: true})
	require.Len(t, ms, 1, "the bind is answered; its event waits for the log")
	assert.Equal(t, uint64(2), ms[0].ID)
	assert.Equal(t, []uint64{1, 0, 1}, okUints(t, protocol.OpBind, ms[0]))

	ms = turn(s, protocol.Request{Op: protocol.OpAdd, ID: 3, Receiver: 2, Tid: 1, After: 100})
	assert.Empty(t, ms, "a change's reply waits for the log")
	ms = turn(s, protocol.Request{Op: protocol.OpPing, ID: 4})
	assert.Empty(t, ms, "a later reply keeps its place behind the held ones")

	h.c.ReleaseHeld()
	ms = h.take(s)
	require.Len(t, ms, 3)
	assert.Equal(t, protocol.KindFire, ms[0].Kind)
	assert.Equal(t, uint64(1), ms[0].Fire.Seq)
	assert.Equal(t, uint64(3), ms[1].ID)
	assert.Equal(t, protocol.KindOK, ms[1].Kind)
	assert.Equal(t, uint64(4), ms[2].ID)
}

// TestHoldTurnReleasesEachTurn: with records made durable one turn at a
// time while later turns run (a cluster leader's pipelined proposals), a
// turn's replies leave as soon as its own record is durable, not when the
// last turn held is (ReleaseHeld's all-or-nothing): each session gets its
// output up to where the output waiting for a later turn begins, in stream
// order, and a reply that needs no record leaves with the turn before it.
// A session waiting for nothing more is no longer held.
func TestHoldTurnReleasesEachTurn(t *testing.T) {
	h := newHarness(t, nil)
	h.c.Record(true)
	a, b := h.session(), h.session()
	turn := 0
	hold := func(s *Session, req protocol.Request) {
		h.send(s, req) // its record is taken (replica.sync)
		turn++
		h.c.HoldTurn(uint64(turn))
	}
	ids := func(ms []protocol.Message) []uint64 {
		var out []uint64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	hold(a, protocol.Request{Op: protocol.OpAdd, ID: 1, Receiver: 1, Tid: 1, After: 100}) // turn 1
	hold(b, protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: 2, Tid: 1, After: 100}) // turn 2
	hold(a, protocol.Request{Op: protocol.OpAdd, ID: 3, Receiver: 1, Tid: 2, After: 100}) // turn 3
	h.send(a, protocol.Request{Op: protocol.OpPing, ID: 4})                               // no record
	hold(a, protocol.Request{Op: protocol.OpCancel, ID: 5, Receiver: 1, Tid: 1})          // turn 4
	assert.Empty(t, h.take(a), "nothing leaves before its record is durable")
	assert.Empty(t, h.take(b))
	assert.Equal(t, 2, h.c.Held())

	h.c.ReleaseTurns(1)
	assert.Equal(t, []uint64{1}, ids(h.take(a)), "turn 1 is durable: its reply leaves, turn 3's waits")
	assert.Empty(t, h.take(b), "turn 2 is not durable yet")

	h.c.ReleaseTurns(3) // turns 2 and 3, reported together
	assert.Equal(t, []uint64{3, 4}, ids(h.take(a)), "the ping's reply leaves with turn 3's, before turn 4's")
	assert.Equal(t, []uint64{2}, ids(h.take(b)))
	assert.Equal(t, 1, h.c.Held(), "b waits for nothing more")

	h.send(a, protocol.Request{Op: protocol.OpPing, ID: 6})
	assert.Empty(t, h.take(a), "a later reply keeps its place behind turn 4's")
	h.c.ReleaseTurns(4)
	assert.Equal(t, []uint64{5, 6}, ids(h.take(a)))
	assert.Equal(t, 0, h.c.Held())
	h.send(a, protocol.Request{Op: protocol.OpPing, ID: 7})
	assert.Equal(t, []uint64{7}, ids(h.take(a)), "no longer held")
}
