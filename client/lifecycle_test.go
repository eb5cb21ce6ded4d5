package client

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"

	"github.com/tickwheel/tickwheel/protocol"
)

// silent answers hello and nothing else: every call stays in flight.
func silent(io.Writer, protocol.Request) bool { return true }

func TestContextCancellation(t *testing.T) {
	f := startFake(t, silent)
	c := dial(t, f.addr())

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := c.Ping(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The fake never replies and the Client has no call timeout of its
	// own: only the context ends the call, so any bound well short of a
	// hang shows that. 1 s was too short for -race -short at load ~10
	// (1.72 s seen).
	assert.Less(t, time.Since(t0), 10*time.Second, "returns on the context's deadline")
	assert.Zero(t, c.pendingCalls(), "the abandoned call is forgotten")

	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Bind(ctx, 1, nil)
		errc <- err
	}()
	eventually(t, "the call in flight", func() bool { return c.pendingCalls() == 1 })
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	// An already-ended context fails before sending.
	_, err = c.Get(ctx, 1, 1)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, c.pendingCalls())
}

func TestDialContext(t *testing.T) {
	// A listener that never accepts: the kernel completes the handshake, but
	// nobody answers hello. ctx bounds Dial.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = Dial(ctx, ln.Addr().String())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(t0), time.Second)
	noLeak(t, before)
}

func TestCloseWithCallsInFlight(t *testing.T) {
	f := startFake(t, silent)
	before := runtime.NumGoroutine()
	c, err := Dial(tctx(t), f.addr())
	require.NoError(t, err)

	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := c.Ping(context.Background())
			errs <- err
		})
	}
	eventually(t, "the calls in flight", func() bool { return c.pendingCalls() == n })
	require.NoError(t, c.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, ErrClosed)
	}
	require.NoError(t, c.Close(), "idempotent")
	_, err = c.Ping(tctx(t))
	require.ErrorIs(t, err, ErrClosed)
	_, ok := <-c.Events()
	assert.False(t, ok, "events channel closed")
	noLeak(t, before+1) // + the fake server's goroutine for this connection, until it sees EOF
	noLeak(t, before)
}

// TestNoGoroutineLeaks runs a Client through its life — calls, events with
// a handler, a reconnect, a blocked event consumer, Close — and checks that
// every goroutine it started has exited once Close returns.
func TestNoGoroutineLeaks(t *testing.T) {
	srv := startServer(t, nil)
	warm := dial(t, srv.Addr()) // let the server start its own goroutines
	_, err := warm.Ping(tctx(t))
	require.NoError(t, err)
	warm.Close()
	time.Sleep(20 * time.Millisecond)
	before := runtime.NumGoroutine()

	ctx := tctx(t)
	got := make(chan Event, 100)
	c1, err := Dial(ctx, srv.Addr(), WithToken(testAdminToken), WithHandler(func(ev Event) { got <- ev }), WithReconnect(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	_, err = c1.Bind(ctx, 1, nil)
	require.NoError(t, err)
	_, err = c1.Add(ctx, 1, 1, 1, &AddOptions{Repeat: 3})
	require.NoError(t, err)
	old := c1.current()
	c1.dropConn()
	// A call racing the loss may fail with ErrDisconnected (documented):
	// this test is about leaks, so it waits for the new connection.
	eventually(t, "the reconnection", func() bool { cn := c1.current(); return cn != nil && cn != old })
	_, _, err = c1.FastForward(ctx, 3)
	require.NoError(t, err)
	for range 3 {
		nextEvent(t, got)
	}

	// A consumer that never reads: the reader blocks on a full buffer.
	c2, err := Dial(ctx, srv.Addr(), WithToken(testAdminToken), WithEventBuffer(1))
	require.NoError(t, err)
	_, err = c2.Bind(ctx, 2, nil)
	require.NoError(t, err)
	for tid := range uint64(5) {
		_, err = c2.Add(ctx, 2, tid, 1, nil)
		require.NoError(t, err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, _, err = c2.FastForward(short, 1) // stuck behind the events
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A client whose server is gone, mid-backoff.
	f := startFake(t, silent)
	c3, err := Dial(ctx, f.addr(), WithReconnect(time.Hour, time.Hour))
	require.NoError(t, err)
	f.stop()

	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())
	require.NoError(t, c3.Close())
	noLeak(t, before)
}

// A server that refuses the connection says why, and Dial returns it: here
// max_connections is reached.
func TestDialOverMaxConnections(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.Limits.MaxConnections = 1 })
	first := dial(t, srv.Addr())
	_, err := first.Ping(tctx(t))
	require.NoError(t, err)
	_, err = Dial(tctx(t), srv.Addr())
	require.ErrorIs(t, err, ErrLimitExceeded)
	require.ErrorIs(t, err, ErrDisconnected)
	assert.Contains(t, err.Error(), "max_connections (1)")
}
