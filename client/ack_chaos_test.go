package client

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestAckChaos: the public Client in AckAuto mode, 3 receivers, 100k
// events at a high rate (20 timers per receiver firing every tick of a
// real 1 ms clock), its connection reset (RST) at 50+ random moments while
// events flow, and reconnecting: the user gets every event exactly once,
// per receiver in strictly increasing seq order with no gap; the Client
// drops the redelivered ones itself, and they are bounded by what was
// unacknowledged at the resets.
func TestAckChaos(t *testing.T) {
	// A reset takes a reconnect and a re-bind, some milliseconds on a
	// busy machine, and the Client's queue still holds the events it read
	// before: the stream must last long enough in time for every reset
	// to happen (short: 12,000 events over 1 s of tw-time).
	timers, repeat, resets, every := 20, 1667, 50, uint64(1) // 100,020 events
	if testing.Short() {
		repeat, resets, every = 200, 10, 5
	}
	srv := servertest.RunT(t, servertest.WithConfig(func(c *server.Config) {
		c.Frozen, c.StartTick, c.Tick = false, 0, time.Millisecond
	}))
	c := dial(t, srv.Addr(), noToken, WithReconnect(time.Millisecond, 5*time.Millisecond))
	ctx := tctx(t)
	recv := []uint64{1, 2, 3}
	for _, r := range recv {
		_, err := c.Bind(ctx, r, &BindOptions{Ack: AckAuto})
		require.NoError(t, err)
	}
	// All first due 200 ticks ahead: the events must not fill the Client's
	// queue while this goroutine still waits for add replies.
	now, err := c.Ping(ctx)
	require.NoError(t, err)
	for _, r := range recv {
		for tid := range timers {
			_, err := c.AddAt(ctx, r, uint64(tid+1), now+200, &AddOptions{Every: every, Repeat: uint32(repeat)})
			require.NoError(t, err)
		}
	}
	want := len(recv) * timers * repeat
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	// Resets at random spacings of at most 2×gap events: at least
	// resets+1 of them fit, whatever the draws.
	gap := want / (2 * (resets + 2))
	nextReset := gap + rng.IntN(gap)
	last := map[uint64]uint64{}
	cut := 0
	for got := 0; got < want; got++ {
		ev := nextEvent(t, c.Events())
		require.Equal(t, Fire, ev.Kind, "%+v", ev)
		if l, ok := last[ev.Receiver]; ok {
			require.Equal(t, l+1, ev.Seq, "receiver %d: each event once, in order, none missing", ev.Receiver)
		}
		last[ev.Receiver] = ev.Seq
		if got >= nextReset && srv.DropConnections() > 0 { // (none while it reconnects: try again)
			cut++
			nextReset = got + gap + rng.IntN(gap)
		}
	}
	require.GreaterOrEqual(t, cut, resets)
	require.Zero(t, c.Dropped())
	t.Logf("%d events, %d resets, %d redelivered and dropped by the Client", want, cut, c.Redelivered())
}
