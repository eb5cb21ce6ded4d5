package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// tickAt is the 10 ms tick of an instant.
func tickAt(t time.Time) uint64 { return uint64(t.UnixNano() / int64(10*time.Millisecond)) }

// A daily 04:00 Europe/Paris reset, through the public client against
// servertest: each day of fast-forwarded tw-time fires it once, at 04:00
// Paris time, across the night Paris springs forward; Get and List show
// its schedule and next due tick; bad expressions and zones are
// ErrInvalidArgument naming what is wrong.
func TestAddScheduleDailyReset(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(tickAt(time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC))))
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 42, nil)
	require.NoError(t, err)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	due, err := c.AddSchedule(ctx, 42, 1, "0 4 * * *", &client.AddOptions{Zone: "Europe/Paris", Missed: client.MissedOnce, Data: []byte("reset")})
	require.NoError(t, err)
	assert.Equal(t, tickAt(time.Date(2026, 3, 28, 4, 0, 0, 0, paris)), due)
	tm, err := c.Get(ctx, 42, 1)
	require.NoError(t, err)
	assert.Equal(t, [4]any{"0 4 * * *", "Europe/Paris", uint64(client.MissedOnce), due}, [4]any{tm.Schedule, tm.Zone, tm.Missed, tm.Due})
	assert.Equal(t, uint64(client.Forever), tm.Repeat, "fires until cancelled")

	for day, want := range []time.Time{time.Date(2026, 3, 28, 4, 0, 0, 0, paris), time.Date(2026, 3, 29, 4, 0, 0, 0, paris)} {
		assert.Equal(t, 1, srv.Advance(24*time.Hour), "day %d fires it once", day)
		ev := <-c.Events()
		assert.Equal(t, tickAt(want), ev.Tick, "day %d", day)
		assert.Equal(t, uint64(day+1), ev.Fired)
		assert.Equal(t, "reset", string(ev.Data))
	}
	ts, err := c.List(ctx, 42)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, tickAt(time.Date(2026, 3, 30, 4, 0, 0, 0, paris)), ts[0].Due)

	_, err = c.AddSchedule(ctx, 42, 2, "0 25 * * *", nil)
	assert.True(t, errors.Is(err, client.ErrInvalidArgument), "%v", err)
	assert.ErrorContains(t, err, "field 2 (hour): 25 is above the maximum 23")
	_, err = c.AddSchedule(ctx, 42, 2, "@daily", &client.AddOptions{Zone: "Europe/Pariss"})
	assert.ErrorContains(t, err, `zone "Europe/Pariss"`)

	// Repeat N fires N times; @every is an interval.
	_, err = c.AddSchedule(ctx, 42, 3, "@every 90s", &client.AddOptions{Repeat: 2})
	require.NoError(t, err)
	assert.Equal(t, 2, srv.Advance(10*time.Minute))
	for range 2 {
		ev := <-c.Events()
		assert.Equal(t, uint64(3), ev.Tid)
	}
}

// Schedules survive a restart (the snapshot taken at the graceful stop
// holds them): the timer comes back with its schedule, zone and policy,
// and fires on schedule.
func TestAddScheduleSurvivesRestart(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithDataDir(t.TempDir()),
		servertest.WithStartTick(tickAt(time.Date(2026, 10, 23, 12, 0, 0, 0, time.UTC))))
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	due, err := c.AddSchedule(ctx, 9, 1, "0 18 * * fri", &client.AddOptions{Zone: "America/New_York", Missed: client.MissedSkip})
	require.NoError(t, err)
	assert.Equal(t, tickAt(time.Date(2026, 10, 23, 18, 0, 0, 0, ny)), due)
	srv.Restart()
	var tm client.Timer
	require.Eventually(t, func() bool { tm, err = c.Get(ctx, 9, 1); return err == nil }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, [4]any{"0 18 * * fri", "America/New_York", uint64(client.MissedSkip), due}, [4]any{tm.Schedule, tm.Zone, tm.Missed, tm.Due})
	_, err = c.Bind(ctx, 9, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, srv.Advance(10*24*time.Hour)) // two Fridays, across New York's fall-back (Nov 1)
	for _, want := range []time.Time{time.Date(2026, 10, 23, 18, 0, 0, 0, ny), time.Date(2026, 10, 30, 18, 0, 0, 0, ny)} {
		ev := <-c.Events()
		assert.Equal(t, tickAt(want), ev.Tick)
	}
	tm, err = c.Get(ctx, 9, 1)
	require.NoError(t, err)
	assert.Equal(t, tickAt(time.Date(2026, 11, 6, 18, 0, 0, 0, ny)), tm.Due, "18:00 EST after the fall-back")
}
