package client

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/servertest"
)

// backlog3 is a frozen test server keeping 3 events per unbound receiver.
// Its clients need no admin rights (servertest advances tw-time itself), so
// they dial with noToken.
func backlog3(t *testing.T) *servertest.Server {
	return servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.Limits.MaxBacklog = 3 }))
}

// noToken has a client say hello without a token: a plain session.
var noToken = WithToken("")

// fireEvent is the event of firing `fired` of timer (receiver, tid), added
// at the servertest start tick to fire every tick, with seq.
func fireEvent(receiver, tid, fired, repeat, seq uint64) Event {
	return Event{Kind: Fire, Receiver: receiver, Tid: tid, Tick: 1_000_000 + fired, Fired: fired, Repeat: repeat,
		Last: fired == repeat, Seq: seq}
}

// TestDroppedOnBind: 10 events while the receiver is unbound, 3 kept: Bind
// returns dropped 7, and the events are a Dropped event of 7 and the three
// kept, in order.
func TestDroppedOnBind(t *testing.T) {
	srv := backlog3(t)
	c := dial(t, srv.Addr(), noToken)
	ctx := tctx(t)
	_, err := c.Add(ctx, 5, 1, 1, &AddOptions{Repeat: 10})
	require.NoError(t, err)
	require.Equal(t, 10, srv.AdvanceTicks(10))

	bound, err := c.Bind(ctx, 5, nil)
	require.NoError(t, err)
	assert.Equal(t, BindResult{Pending: 3, Dropped: 7}, bound)
	assert.Equal(t, Event{Kind: Dropped, Receiver: 5, Count: 7}, nextEvent(t, c.Events()))
	for i := uint64(8); i <= 10; i++ {
		assert.Equal(t, fireEvent(5, 1, i, 10, i), nextEvent(t, c.Events()))
	}
	noEvent(t, c.Events())
	assert.Equal(t, uint64(7), c.Dropped())
}

// TestDroppedOnRebind: 10 events fire while the Client is away after a
// connection loss, of which the server keeps 3. The automatic re-bind
// surfaces the other 7 as a Dropped event ahead of the three: when the
// Client had seen no event before (only the bind reply can tell), and when
// it had seen 2 (counted once: the seq then goes on from 2 + 7 without a
// gap).
func TestDroppedOnRebind(t *testing.T) {
	for _, seen := range []uint64{0, 2} {
		t.Run(fmt.Sprintf("seen=%d", seen), func(t *testing.T) { testDroppedOnRebind(t, seen) })
	}
}

func testDroppedOnRebind(t *testing.T, seen uint64) {
	srv := backlog3(t)
	c := dial(t, srv.Addr(), noToken, WithReconnect(500*time.Millisecond, 500*time.Millisecond))
	probe := dial(t, srv.Addr(), noToken, WithReconnect(0, 0))
	ctx := tctx(t)
	_, err := c.Bind(ctx, 5, nil)
	require.NoError(t, err)
	// A timer of an ephemeral receiver shows when the server has closed
	// the session: it is cancelled then.
	_, err = c.Bind(ctx, 6, &BindOptions{Ephemeral: true})
	require.NoError(t, err)
	_, err = c.Add(ctx, 6, 1, 1000, nil)
	require.NoError(t, err)
	repeat := seen + 10
	_, err = c.Add(ctx, 5, 1, 1, &AddOptions{Repeat: uint32(repeat)})
	require.NoError(t, err)
	srv.AdvanceTicks(seen)
	for i := uint64(1); i <= seen; i++ {
		require.Equal(t, fireEvent(5, 1, i, repeat, i), nextEvent(t, c.Events()))
	}
	session := c.Session()

	c.dropConn() // the Client redials 250..500ms later
	eventually(t, "the server to close the session", func() bool {
		_, err := probe.Get(ctx, 6, 1)
		return err != nil
	})
	require.ErrorIs(t, func() error { _, err := probe.Get(ctx, 6, 1); return err }(), ErrNotFound)
	require.Equal(t, 10, srv.AdvanceTicks(10), "10 fire while the Client is away")

	assert.Equal(t, Event{Kind: Dropped, Receiver: 5, Count: 7}, nextEvent(t, c.Events()))
	for i := seen + 8; i <= repeat; i++ {
		assert.Equal(t, fireEvent(5, 1, i, repeat, i), nextEvent(t, c.Events()))
	}
	assert.NotEqual(t, session, c.Session(), "after a reconnect")
	noEvent(t, c.Events())
	assert.Equal(t, uint64(7), c.Dropped())
}

// TestDroppedSeqGaps: a fire whose seq jumps is preceded by a Dropped event
// for the missing count; seq 1 restarts the count, and so does a seq at or
// below the last one; the first seq of a receiver, and the first after an
// Unbind or a Takeover, is not a gap.
func TestDroppedSeqGaps(t *testing.T) {
	// The fake server answers bind of receiver r with [0, 0] and then the
	// fires scripted for r; unbind with [].
	script := map[uint64][]uint64{
		7: {1, 2, 5, 6, 1, 2, 9, 4, 5},
		8: {3, 4, 6},
		9: {20},
	}
	var binds int
	f := startFake(t, func(w io.Writer, req protocol.Request) bool {
		var out []byte
		switch req.Op {
		case protocol.OpBind:
			binds++
			out = protocol.AppendOK(nil, req.ID, 0, 0)
			seqs := script[req.Receiver]
			if req.Receiver == 7 && binds > 1 {
				seqs = []uint64{30} // bound again after the unbind
			}
			for _, seq := range seqs {
				out = protocol.AppendFire(out, &protocol.Fire{Receiver: req.Receiver, Tid: 1, Seq: seq})
			}
			if req.Receiver == 9 {
				out = protocol.AppendTakeover(out, 9, 2)
			}
		case protocol.OpUnbind:
			out = protocol.AppendOK(nil, req.ID)
		default:
			out = protocol.AppendOK(nil, req.ID, 0)
		}
		_, err := w.Write(out)
		return err == nil
	})
	c := dial(t, f.addr())
	ctx := tctx(t)
	// got lists the events as "r:seq" for fires and "r:-count" for drops.
	got := func(n int) []int64 {
		var out []int64
		for range n {
			ev := nextEvent(t, c.Events())
			switch ev.Kind {
			case Fire:
				out = append(out, int64(ev.Receiver*1000+ev.Seq))
			case Dropped:
				out = append(out, -int64(ev.Receiver*1000+ev.Count))
			case Takeover:
				out = append(out, 0)
			}
		}
		return out
	}
	_, err := c.Bind(ctx, 7, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{7001, 7002, -7002, 7005, 7006, 7001, 7002, -7006, 7009, 7004, 7005}, got(11))
	assert.Equal(t, uint64(8), c.Dropped())

	_, err = c.Bind(ctx, 8, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{8003, 8004, -8001, 8006}, got(4), "the first seq seen is not a gap")
	assert.Equal(t, uint64(9), c.Dropped())

	require.NoError(t, c.Unbind(ctx, 7))
	_, err = c.Bind(ctx, 7, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{7030}, got(1), "after an unbind, another session's events are no gap")

	_, err = c.Bind(ctx, 9, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{9020, 0}, got(2))
	c.seqMu.Lock()
	_, known := c.seqs[9]
	c.seqMu.Unlock()
	assert.False(t, known, "a takeover forgets the receiver's seq")
	noEvent(t, c.Events())
	assert.Equal(t, uint64(9), c.Dropped())
	assert.Equal(t, "dropped", Dropped.String())
}
