package session

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// pipeline sends reqs from c as the server reads a pipelined batch: a
// request is not read while c's fast-forward is in progress, so advance
// turns run (as the server's loop does) until its reply is out. It returns
// the requests' ids.
func (c *client) pipeline(reqs ...protocol.Request) []uint64 {
	c.t.Helper()
	var ids []uint64
	for _, req := range reqs {
		for turns := 0; c.s.Waiting(); turns++ {
			require.Less(c.t, turns, 1_000_000, "the fast-forward never ends")
			c.h.advance()
		}
		ids = append(ids, c.send(req))
	}
	return ids
}

// TestPipelineAfterFastForward: requests pipelined behind a fast_forward are
// answered after it, in order, and see tw-time after it; every event it
// caused comes before its reply, and the events of a second fast-forward
// come between its request and its reply. With max_fires_per_turn small
// the fast-forward spans several advance turns.
func TestPipelineAfterFastForward(t *testing.T) {
	for _, maxFires := range []int{0, 7} {
		t.Run("max_fires_per_turn="+strconv.Itoa(maxFires), func(t *testing.T) {
			h := newHarness(t, func(c *Config, _ *Limits) { c.MaxFiresPerTurn = maxFires })
			c := h.client("ff")
			other := h.client("other")
			c.bind(1, false)
			other.bind(2, false)
			for tid := range uint64(10) {
				c.add(protocol.Request{Receiver: 1, Tid: tid, After: 1}) // 10 per tick, forever
			}
			other.add(protocol.Request{Receiver: 2, Tid: 1, After: 3})

			ids := c.pipeline(
				protocol.Request{Op: protocol.OpFastForward, Ticks: 10},
				protocol.Request{Op: protocol.OpPing},
				protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 100, After: 5},
				protocol.Request{Op: protocol.OpFastForward, Ticks: 2},
				protocol.Request{Op: protocol.OpGet, Receiver: 1, Tid: 100},
				protocol.Request{Op: protocol.OpPing},
			)
			got, replies := readInOrder(c, len(ids))
			for i, m := range replies {
				require.Equal(t, ids[i], m.ID, "replies in request order")
				require.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
			}
			assert.Equal(t, []uint64{start + 10, 100 + 3}, okUints(t, protocol.OpFastForward, replies[0]), "ff fired c's 100 and other's 3")
			assert.Equal(t, []uint64{start + 10}, okUints(t, protocol.OpPing, replies[1]))
			assert.Equal(t, []uint64{start + 15}, okUints(t, protocol.OpAdd, replies[2]))
			assert.Equal(t, []uint64{start + 12, 21}, okUints(t, protocol.OpFastForward, replies[3]))
			var tm protocol.Timer
			require.NoError(t, protocol.DecodeTimer(replies[4].Result, &tm))
			assert.Equal(t, uint64(start+15), tm.Due)
			assert.Equal(t, uint64(3), tm.Remaining)
			assert.Equal(t, []uint64{start + 12}, okUints(t, protocol.OpPing, replies[5]))

			// Events: 100 (ticks 1..10, in order) before the first reply; 20
			// (ticks 11, 12) between the second fast-forward's request and
			// its reply.
			pos := func(id uint64) int {
				for i, it := range got {
					if it.kind != protocol.KindFire && it.id == id {
						return i
					}
				}
				t.Fatalf("no reply %d", id)
				return -1
			}
			require.Equal(t, 100, pos(ids[0]))
			last := uint64(0)
			for _, it := range got[:100] {
				require.Equal(t, protocol.KindFire, it.kind)
				require.GreaterOrEqual(t, it.tick, last)
				require.LessOrEqual(t, it.tick, uint64(start+10))
				last = it.tick
			}
			require.Equal(t, 103, pos(ids[2])+1, "ping and add follow the first ff reply directly")
			require.Equal(t, 123, pos(ids[3]))
			for _, it := range got[103:123] {
				require.Equal(t, protocol.KindFire, it.kind)
				require.Greater(t, it.tick, uint64(start+10))
			}

			// The other session was served as usual.
			other.ping()
			fs := other.fires()
			require.Len(t, fs, 4)
			assert.Equal(t, uint64(start+12), fs[3].Tick)
		})
	}
}

// arrival is a message as it arrived: a fire's tick, or a reply's id.
type arrival struct {
	kind protocol.Kind
	id   uint64
	tick uint64
}

// readInOrder reads c's messages until n replies have come, and returns
// every message in arrival order and the replies.
func readInOrder(c *client, n int) (got []arrival, replies []protocol.Message) {
	for len(replies) < n {
		m := c.read()
		if m.Kind == protocol.KindFire {
			got = append(got, arrival{m.Kind, 0, m.Fire.Tick})
			continue
		}
		got = append(got, arrival{m.Kind, m.ID, 0})
		replies = append(replies, m)
	}
	return got, replies
}

// TestFastForwardSpansTurns: a fast-forward bounded by max_fires_per_turn
// goes on over advance turns; until its last one its session waits (its
// next requests are not read) and gets no reply; the reply comes after all
// its events, and what is read next sees tw-time after it.
func TestFastForwardSpansTurns(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *Limits) { c.MaxFiresPerTurn = 1 })
	c := h.client("ff")
	c.bind(1, false)
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 1}) // every tick, forever
	ffID := c.send(protocol.Request{Op: protocol.OpFastForward, Ticks: 300})
	for range 10 {
		require.True(t, h.advance(), "work is left")
		require.True(t, c.s.Waiting())
	}
	var before []protocol.Message
	for c.pending() {
		before = append(before, c.read())
	}
	require.NotEmpty(t, before)
	for _, m := range before {
		require.Equal(t, protocol.KindFire, m.Kind, "no reply before the last turn")
	}
	assert.Equal(t, []uint64{start + 300, 300}, okUints(t, protocol.OpFastForward, c.reply(ffID)))
	assert.Len(t, append(before, c.events...), 300, "every event before the fast-forward's reply")
	require.False(t, c.s.Waiting())
	assert.Equal(t, uint64(start+300), c.ping())
	assert.Equal(t, uint64(start+301), c.add(protocol.Request{Receiver: 1, Tid: 2, After: 1, Repeat: 1}))
}
