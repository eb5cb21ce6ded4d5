package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A deadline already reached is a timer that fires at once, not an
// error: Add(0), AddAfter(d <= 0) and AddAt at or before now fire at the
// server's next tick, and AddAt's event says in Late how far in the past
// it was asked for. (ErrInvalidArgument before zero delays.)
func TestZeroAndPastDelays(t *testing.T) {
	srv := startServer(t, nil) // frozen at start
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)

	deadline := time.Now().Add(-time.Second) // a game's deadline, already gone
	for _, add := range []func() (uint64, error){
		func() (uint64, error) { return c.Add(ctx, 1, 1, 0, nil) },
		func() (uint64, error) { return c.AddAfter(ctx, 1, 2, time.Until(deadline), nil) },
		func() (uint64, error) { return c.AddAt(ctx, 1, 3, start-40, nil) },
		func() (uint64, error) { return c.AddAfter(ctx, 1, 4, 0, &AddOptions{Repeat: 2}) },
	} {
		due, err := add()
		require.NoError(t, err)
		assert.Equal(t, uint64(start+1), due)
	}
	tm, err := c.Get(ctx, 1, 4)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), tm.Every, "every defaults to the first delay: one tick")

	_, _, err = srv.FastForward(ctx, 2)
	require.NoError(t, err)
	late := map[uint64][]uint64{}
	for range 5 {
		ev := nextEvent(t, c.Events())
		late[ev.Tid] = append(late[ev.Tid], ev.Late)
	}
	assert.Equal(t, map[uint64][]uint64{1: {0}, 2: {0}, 3: {40}, 4: {0, 0}}, late)
}
