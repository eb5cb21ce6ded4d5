package client

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
)

// On a server that follows real time, no timer added with AddAfter
// arrives before its duration has passed since the call was made,
// whatever point of the tick the call falls on. (Lateness is not
// asserted: the machine may be busy; early is never allowed.)
func TestAddAfterNeverEarlyLive(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.Frozen, c.StartTick, c.Tick = false, 0, 5*time.Millisecond })
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)

	const n = 400
	rng := rand.New(rand.NewPCG(5, 6))
	deadline := make([]time.Time, n)
	for i := range n {
		d := time.Duration(1 + rng.Int64N(int64(20*time.Millisecond)))
		if i%4 == 0 {
			d = time.Duration(1+rng.IntN(4)) * 5 * time.Millisecond // whole ticks
		}
		deadline[i] = time.Now().Add(d)
		_, err := c.AddAfter(ctx, 1, uint64(i), d, nil)
		require.NoError(t, err)
		time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Microsecond)))) // land on many points of the tick
	}
	var early int
	for range n {
		ev := nextEvent(t, c.Events())
		if got := time.Now(); got.Before(deadline[ev.Tid]) {
			early++
			t.Errorf("timer %d arrived %v early", ev.Tid, deadline[ev.Tid].Sub(got))
		}
	}
	require.Zero(t, early)
}
