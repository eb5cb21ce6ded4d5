package servertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestPoison is the game team's test from the servertest doc: poison for
// 10 s, ticking every second, checked without sleeping.
func TestPoison(t *testing.T) {
	srv := servertest.RunT(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	const player, poison = 42, 7
	_, err = c.Bind(ctx, player, nil)
	require.NoError(t, err)
	start := srv.Now()
	_, err = c.AddAfter(ctx, player, poison, time.Second, &client.AddOptions{Repeat: 10, Data: []byte("poison")})
	require.NoError(t, err)

	began := time.Now()
	assert.Equal(t, 9, srv.Advance(9*time.Second), "nine ticks of poison after 9 s")
	assert.Equal(t, 1, srv.Advance(1500*time.Millisecond), "the tenth, rounding 1.5 s up to whole ticks")
	assert.Less(t, time.Since(began), 5*time.Second, "no sleeping")
	for i := uint64(1); i <= 10; i++ {
		ev := <-c.Events()
		assert.Equal(t, i, ev.Fired)
		assert.Equal(t, start+i*100, ev.Tick, "every 100 ticks of 10 ms")
		assert.Equal(t, i == 10, ev.Last)
	}
	assert.Equal(t, start+1050, srv.Now())
	assert.Equal(t, 0, srv.AdvanceTicks(1000), "the poison is over")
}

func TestRunTOptions(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(77), servertest.WithConfig(func(c *servertest.Config) { c.Tick = time.Second }))
	assert.Equal(t, uint64(77), srv.Now())
	assert.Equal(t, time.Second, srv.Tick())
	assert.Equal(t, 0, srv.Advance(0))
}

// TestAdminToken: a client with the server's admin token may call admin ops;
// one without may not (loopback gives no rights).
func TestAdminToken(t *testing.T) {
	srv := servertest.RunT(t)
	ctx := context.Background()
	require.Len(t, srv.AdminToken(), 32)
	assert.NotEqual(t, srv.AdminToken(), servertest.RunT(t).AdminToken(), "each server has its own")

	admin, err := client.Dial(ctx, srv.Addr(), client.WithToken(srv.AdminToken()))
	require.NoError(t, err)
	defer admin.Close()
	now, _, err := admin.FastForward(ctx, 5)
	require.NoError(t, err)
	assert.Equal(t, uint64(1_000_005), now)

	user, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer user.Close()
	_, err = user.Stats(ctx)
	require.ErrorIs(t, err, client.ErrUnauthorized)

	fixed := servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.AdminToken = "mine-0123456789abcdef" }))
	assert.Equal(t, "mine-0123456789abcdef", fixed.AdminToken())
}

// TestRestart: a building upgrade survives a deploy. With WithDataDir the
// server restarts on its state: the client reconnects and re-binds by
// itself, the timer is still due at its tick, and fires there.
func TestRestart(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithDataDir(t.TempDir()))
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	const player, upgrade = 42, 1
	_, err = c.Bind(ctx, player, nil)
	require.NoError(t, err)
	due, err := c.AddAfter(ctx, player, upgrade, 8*time.Hour, &client.AddOptions{Repeat: 1, Data: []byte("barracks")})
	require.NoError(t, err)
	srv.Advance(time.Hour)

	srv.Restart()
	assert.Equal(t, due-7*360_000, srv.Now(), "tw-time is where it was (frozen)")
	assert.Equal(t, 1, srv.Advance(7*time.Hour), "the upgrade fires after the restart")
	select {
	case ev := <-c.Events():
		assert.Equal(t, due, ev.Tick)
		assert.Equal(t, "barracks", string(ev.Data))
	case <-time.After(5 * time.Second):
		t.Fatal("no event after the restart: the client did not re-bind")
	}
}

// TestDropConnections: DropConnections resets the client's connection; the
// client reconnects, re-binds, and gets the events fired meanwhile. Its
// connection is then cut again, with the server's own still working.
func TestDropConnections(t *testing.T) {
	srv := servertest.RunT(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.WithReconnect(time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 7, nil)
	require.NoError(t, err)
	_, err = c.Add(ctx, 7, 1, 1, &client.AddOptions{Repeat: 2})
	require.NoError(t, err)
	session := c.Session()

	assert.Equal(t, 1, srv.DropConnections())
	assert.Equal(t, 1, srv.AdvanceTicks(1))
	ev := <-c.Events()
	assert.Equal(t, uint64(1), ev.Fired, "kept while the client was away, delivered after the re-bind")
	assert.NotEqual(t, session, c.Session(), "a new session")

	assert.Equal(t, 1, srv.DropConnections())
	assert.Equal(t, 1, srv.AdvanceTicks(1))
	ev = <-c.Events()
	assert.Equal(t, uint64(2), ev.Fired)
	assert.NotEqual(t, srv.Addr(), srv.Server().Addr(), "clients go through the relay")
}

// TestDropConnectionsAck is the servertest doc's test of redelivery: with
// acknowledged mode, events delivered but not yet taken when the
// connection is cut come again after the re-bind; the client drops those it
// had delivered, so the test sees each event once.
func TestDropConnectionsAck(t *testing.T) {
	srv := servertest.RunT(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.WithReconnect(time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 7, &client.BindOptions{Ack: client.AckAuto})
	require.NoError(t, err)
	_, err = c.Add(ctx, 7, 1, 1, &client.AddOptions{Repeat: 4})
	require.NoError(t, err)
	srv.AdvanceTicks(2)
	require.Eventually(t, func() bool { return len(c.Events()) == 2 }, 5*time.Second, time.Millisecond,
		"the events cross the relay")
	assert.Equal(t, 1, srv.DropConnections())
	srv.AdvanceTicks(2)
	for i := uint64(1); i <= 4; i++ {
		assert.Equal(t, i, (<-c.Events()).Seq)
	}
	assert.Equal(t, uint64(2), c.Redelivered())
}

// A frozen test server sits on a tick boundary, so AddAfter(d) fires
// exactly when Advance has moved tw-time by d: not a tick before.
func TestAddAfterThenAdvance(t *testing.T) {
	srv := servertest.RunT(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.WithToken(srv.AdminToken()))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 1, nil)
	require.NoError(t, err)
	_, err = c.AddAfter(ctx, 1, 1, 25*time.Millisecond, nil) // 10ms ticks: due in 3
	require.NoError(t, err)
	require.Equal(t, 0, srv.Advance(20*time.Millisecond))
	require.Equal(t, 1, srv.Advance(5*time.Millisecond))
	ev := <-c.Events()
	require.Equal(t, uint64(1), ev.Tid)
}

// TestAdvanceUnreadEvents: the package doc's warning. Past its event
// buffer of unread events a client's next call hangs (here: until its
// deadline); dialled with a buffer that holds them, the test advances
// first and reads afterwards.
func TestAdvanceUnreadEvents(t *testing.T) {
	ctx := context.Background()
	for _, buf := range []int{0, 4096} { // 0: the default, 1024
		srv := servertest.RunT(t)
		opts := []client.Option{}
		if buf > 0 {
			opts = append(opts, client.WithEventBuffer(buf))
		}
		c, err := client.Dial(ctx, srv.Addr(), opts...)
		require.NoError(t, err)
		receiver := uint64(100 + buf)
		_, err = c.Bind(ctx, receiver, nil)
		require.NoError(t, err)
		_, err = c.Add(ctx, receiver, 1, 1, &client.AddOptions{Repeat: client.Forever})
		require.NoError(t, err)
		require.Equal(t, 3000, srv.AdvanceTicks(3000), "Advance returns either way")
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = c.Get(cctx, receiver, 1)
		cancel()
		if buf == 0 {
			require.ErrorIs(t, err, context.DeadlineExceeded, "the reply waits behind 1024 unread events")
		} else {
			require.NoError(t, err, "all 3000 events fit in the buffer")
			for i := uint64(1); i <= 3000; i++ {
				require.Equal(t, i, (<-c.Events()).Fired)
			}
		}
		c.Close()
	}
}

// TestBulkAcrossRestart: a pause_all of a group, going one timer a turn,
// is cut by a restart; the server comes back with the operation in its
// state (the snapshot of a graceful stop, or the log) and finishes it by
// itself: every timer of the group ends paused, still in the group, and
// timers outside it run; the client's retry of the operation (with its
// request id) gets its one reply, counting every timer once.
func TestBulkAcrossRestart(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithDataDir(t.TempDir()),
		servertest.WithConfig(func(c *servertest.Config) {
			c.Limits.MaxBulkPerTurn = 1
			c.Limits.MaxRequestIDs = 100_000 // so that the client retries the operation
		}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	const timers = 20_000
	_, err = c.Pipelined(ctx, func(p *client.Pipe) error {
		for i := range uint64(timers) {
			p.Add(1+i%4, i, 100, &client.AddOptions{Group: 7})
		}
		p.Add(9, 1, 100, nil)
		return nil
	})
	require.NoError(t, err)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := c.PauseGroup(ctx, 7); done <- result{n, err} }()
	time.Sleep(50 * time.Millisecond) // 20,000 turns take far longer
	srv.Restart()
	// The restart cut the connection before the reply; the client sends
	// the operation again with its request id, the restarted server (which
	// goes on with the operation it recovered) hands it to the retry, and
	// the one reply counts every timer once.
	r := <-done
	require.NoError(t, r.err, "the pause_all retried with its request id across the restart")
	assert.Equal(t, timers, r.n)
	require.Eventually(t, func() bool {
		ts, err := c.ListGroup(ctx, 7)
		if err != nil || len(ts) != timers {
			return false
		}
		for _, tm := range ts {
			if !tm.Paused || tm.Group != 7 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the operation finished after the restart")
	tm, err := c.Get(ctx, 9, 1)
	require.NoError(t, err)
	assert.False(t, tm.Paused)
}
