package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
)

// TestGroupCalls drives groups and the bulk calls through a real server
// whose bulk operations go 7 timers a loop turn, so that each one spans
// turns: Add's Group reads back from Get, List and ListGroup (paged in
// (receiver, tid) order), PauseGroup keeps each timer's remaining ticks
// across a fast-forward and ResumeGroup gives them back, a timer added to
// a paused group starts paused, PauseAll/ResumeAll do the same for a
// receiver, and CancelGroup removes the group's timers, leaving the others.
func TestGroupCalls(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.Limits.MaxBulkPerTurn = 7 })
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	for i := range uint64(30) {
		_, err := c.Add(ctx, 1+i%3, i, 10+i, &AddOptions{Group: 42})
		require.NoError(t, err)
	}
	_, err := c.Add(ctx, 1, 100, 10, nil)
	require.NoError(t, err)
	tm, err := c.Get(ctx, 2, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), tm.Group)
	ts, err := c.List(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(0), ts[len(ts)-1].Group, "tid 100 is in no group")

	all, err := c.ListGroup(ctx, 42)
	require.NoError(t, err)
	require.Len(t, all, 30)
	assert.Equal(t, [2]uint64{1, 0}, [2]uint64{all[0].Receiver, all[0].Tid})
	assert.Equal(t, [2]uint64{3, 29}, [2]uint64{all[29].Receiver, all[29].Tid})
	page, next, err := c.ListGroupPage(ctx, 42, GroupCursor{}, 4)
	require.NoError(t, err)
	assert.Len(t, page, 4)
	assert.Equal(t, GroupCursor{1, 12}, next)

	n, err := c.PauseGroup(ctx, 42)
	require.NoError(t, err)
	assert.Equal(t, 30, n)
	_, err = c.Add(ctx, 3, 200, 5, &AddOptions{Group: 42})
	require.NoError(t, err)
	_, fired, err := c.FastForward(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), fired, "only the timer outside the group fired")
	tm, err = c.Get(ctx, 2, 4)
	require.NoError(t, err)
	assert.True(t, tm.Paused)
	assert.Equal(t, uint64(14), tm.Remaining)
	n, err = c.ResumeGroup(ctx, 42)
	require.NoError(t, err)
	assert.Equal(t, 31, n, "the timer added while paused too")
	tm, err = c.Get(ctx, 2, 4)
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{14, start + 100 + 14}, [2]uint64{tm.Remaining, tm.Due})

	n, err = c.PauseAll(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, 11, n)
	n, err = c.ResumeAll(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, 11, n)

	n, err = c.CancelGroup(ctx, 42)
	require.NoError(t, err)
	assert.Equal(t, 31, n)
	all, err = c.ListGroup(ctx, 42)
	require.NoError(t, err)
	assert.Empty(t, all)
	_, err = c.CancelGroup(ctx, 0)
	requireCode(t, err, ErrInvalidArgument, protocol.OpCancelGroup, protocol.CodeInvalidArgument)
}
