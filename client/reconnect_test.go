package client

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
)

// TestReconnectSamePort: the server stops and a new one starts on the same
// port; the Client reconnects, re-binds its receivers, and calls made
// meanwhile wait for the new connection.
func TestReconnectSamePort(t *testing.T) {
	srv1 := startServer(t, nil)
	addr := srv1.Addr()
	c := dial(t, addr, WithReconnect(300*time.Millisecond, 300*time.Millisecond))
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)
	_, err = c.Bind(ctx, 2, &BindOptions{Ephemeral: true})
	require.NoError(t, err)

	// Work around the server bug shown by TestRestartSamePortImmediately:
	// our end closes first, so that the server's end of the connection does
	// not hold the port in TIME_WAIT. The first redial comes 150..300ms
	// later, after the stop.
	c.dropConn()
	stopServer(t, srv1)

	// A call made while the server is down waits for the reconnection.
	pinged := make(chan error, 1)
	go func() {
		_, err := c.Ping(ctx)
		pinged <- err
	}()

	var srv2 *server.Server
	eventually(t, "a new server on "+addr, func() bool {
		s, err := server.New(testConfig(t, addr, 5000), discardLogger())
		require.NoError(t, err)
		if s.Start() != nil {
			return false // the port may linger in TIME_WAIT: see TestRestartSamePortImmediately
		}
		srv2 = s
		return true
	})
	t.Cleanup(func() { stopServer(t, srv2) })

	require.NoError(t, <-pinged)
	now, err := c.Ping(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5000), now, "talking to the new server")

	// Receivers 1 and 2 were bound again: another session binding them
	// takes them over from this Client.
	other := dial(t, addr)
	for _, r := range []uint64{1, 2} {
		_, err = other.Bind(ctx, r, nil)
		require.NoError(t, err)
		ev := nextEvent(t, c.Events())
		assert.Equal(t, Event{Kind: Takeover, Receiver: r, NewSession: other.Session()}, ev)
	}
}

// TestRestartSamePortImmediately: a server can listen again on the port of
// a server that just stopped with clients connected, although the stop left
// the server's end of each connection in TIME_WAIT (the listener sets
// SO_REUSEADDR).
func TestRestartSamePortImmediately(t *testing.T) {
	srv1 := startServer(t, nil)
	addr := srv1.Addr()
	c := dial(t, addr, WithReconnect(0, 0))
	_, err := c.Ping(tctx(t))
	require.NoError(t, err)
	stopServer(t, srv1)
	_, err = c.Ping(tctx(t))
	require.ErrorIs(t, err, ErrDisconnected)

	s, err := server.New(testConfig(t, addr, 5000), discardLogger())
	require.NoError(t, err)
	err = s.Start()
	if err != nil {
		t.Fatalf("restarting on %s right after a stop: %v", addr, err)
	}
	stopServer(t, s)
}

// TestEventsWhileDisconnected: timers that fire while the Client is
// disconnected are kept by the server and delivered after the re-bind, in
// order, without gaps.
func TestEventsWhileDisconnected(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr(), WithReconnect(500*time.Millisecond, 500*time.Millisecond))
	admin := dial(t, srv.Addr(), WithReconnect(0, 0))
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)
	_, err = c.Bind(ctx, 2, &BindOptions{Ephemeral: true}) // ephemeral: its timers die with the session
	require.NoError(t, err)
	_, err = c.Add(ctx, 1, 10, 1, &AddOptions{Repeat: 3, Data: []byte("d")})
	require.NoError(t, err)
	_, err = c.Add(ctx, 2, 20, 1, nil)
	require.NoError(t, err)
	_, _, err = admin.FastForward(ctx, 1)
	require.NoError(t, err)
	ev := nextEvent(t, c.Events())
	assert.Equal(t, uint64(1), ev.Seq)
	ev = nextEvent(t, c.Events())
	assert.Equal(t, uint64(2), ev.Receiver)
	session1 := c.Session()

	c.dropConn()
	eventually(t, "the server to see the session go", func() bool {
		s, err := admin.Stats(ctx)
		require.NoError(t, err)
		return s.Sessions == 1
	})
	_, fired, err := admin.FastForward(ctx, 2) // fires tid 10 twice, into the backlog
	require.NoError(t, err)
	assert.Equal(t, uint64(2), fired)
	s, err := admin.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), s.BacklogEvents, "fired while the client was away (it redials 250..500ms after the loss)")

	// Receiver 1 still had timers, so the server kept its record and the
	// sequence numbers go on from before the loss.
	for i := uint64(2); i <= 3; i++ {
		ev := nextEvent(t, c.Events())
		assert.Equal(t, Event{Kind: Fire, Receiver: 1, Tid: 10, Tick: start + i, Fired: i, Repeat: 3, Last: i == 3, Data: []byte("d"), Seq: i}, ev)
	}
	assert.NotEqual(t, session1, c.Session())
	eph, ok := c.isBound(2)
	assert.True(t, ok)
	assert.True(t, eph)
	ts, err := c.List(ctx, 2)
	require.NoError(t, err)
	assert.Empty(t, ts, "the ephemeral receiver's timers ended with the old session")
	noEvent(t, c.Events())
}

// TestDisconnectedInFlight: a call in flight when the connection drops
// fails with ErrDisconnected; with reconnection off, later calls do too and
// the Events channel is closed.
func TestDisconnectedInFlight(t *testing.T) {
	f := startFake(t, func(_ io.Writer, req protocol.Request) bool { return req.Op != protocol.OpPing })
	c := dial(t, f.addr(), WithReconnect(0, 0))
	_, err := c.Ping(tctx(t))
	require.ErrorIs(t, err, ErrDisconnected)
	var e *Error
	assert.False(t, errors.As(err, &e))
	_, err = c.Ping(tctx(t))
	require.ErrorIs(t, err, ErrDisconnected)
	_, err = c.Get(tctx(t), 1, 1)
	require.ErrorIs(t, err, ErrDisconnected)
	select {
	case _, ok := <-c.Events():
		assert.False(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("events channel not closed")
	}
	require.NoError(t, c.Close())
	_, err = c.Ping(tctx(t))
	require.ErrorIs(t, err, ErrClosed)
}

// TestDisconnectedThenReconnect: with reconnection on, the call in flight
// fails with ErrDisconnected and the next one goes to the new connection.
func TestDisconnectedThenReconnect(t *testing.T) {
	var pings atomic.Int32
	f := startFake(t, func(w io.Writer, req protocol.Request) bool {
		if req.Op == protocol.OpPing && req.ID > 0 && pings.Add(1) > 1 {
			_, err := w.Write(protocol.AppendOK(nil, req.ID, 4242))
			return err == nil
		}
		return true // the first ping is left unanswered
	})
	c := dial(t, f.addr(), WithReconnect(time.Millisecond, 10*time.Millisecond))
	ctx := tctx(t)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Ping(ctx)
		errc <- err
	}()
	eventually(t, "the call in flight", func() bool { return c.pendingCalls() == 1 })
	c.dropConn()
	require.ErrorIs(t, <-errc, ErrDisconnected)
	now, err := c.Ping(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4242), now)
}

// TestCancelWhileReconnecting: a call waiting for a connection returns
// ctx.Err() when its context ends.
func TestCancelWhileReconnecting(t *testing.T) {
	f := startFake(t, func(io.Writer, protocol.Request) bool { return true })
	c := dial(t, f.addr(), WithReconnect(time.Hour, time.Hour))
	f.stop()
	eventually(t, "the client to notice", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.cn == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := c.Ping(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(t0), time.Second)
}
