package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestStopWithClients: Stop returns promptly while clients are connected
// (idle, bound with timers, half-way through a frame, not said hello) and
// every client sees the connection end.
func TestStopWithClients(t *testing.T) {
	srv := newServer(t, nil)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop(context.Background())
		}
	})
	idle := helloClient(t, srv, "idle")
	bound := helloClient(t, srv, "bound")
	bound.bind(1, true)
	bound.add(protocol.Request{Receiver: 1, Tid: 1, After: 1})
	bound.ff(3)
	partial := helloClient(t, srv, "partial")
	partial.write(protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpPing, ID: 9})[:3])
	anon := dial(t, srv)
	clients := []*rawClient{idle, bound, partial, anon}
	// Wait until the loop has opened anon (it has not said hello, so it is a
	// connection, not a session): Stop closes what the loop knows.
	require.Eventually(t, func() bool { return idle.stats().Connections == 4 }, ioTimeout, time.Millisecond)
	idle.ping()

	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	began := time.Now()
	require.NoError(t, srv.Stop(ctx))
	stopped = true
	took := time.Since(began)
	t.Logf("Stop took %v", took)
	assert.Less(t, took, time.Second, "Stop returns promptly")
	select {
	case <-srv.Done():
	default:
		t.Fatal("Done is not closed after Stop")
	}

	for _, c := range clients {
		c.readUntilClosed()
	}
	// The port no longer accepts.
	conn, err := net.DialTimeout("tcp", srv.Addr(), time.Second)
	if err == nil {
		conn.Close()
		t.Fatal("the server still accepts connections after Stop")
	}
	// Stop again is harmless.
	require.NoError(t, srv.Stop(ctx))
}

// TestStopRightAfterStart: Stop during the first milliseconds, while the
// server is still registering its internal clock connection, returns
// promptly (it used to hang forever when the engine stopped before the event
// loop took that connection).
func TestStopRightAfterStart(t *testing.T) {
	for i := range 30 {
		srv := newServer(t, nil)
		if i%2 == 1 {
			helloClient(t, srv, "quick").ping()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		require.NoError(t, srv.Stop(ctx), "iteration %d", i)
		cancel()
	}
}
