package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// durable returns a mutate that makes a server keep its state in dir with
// the given fsync policy.
func durable(dir, fsync string) func(*Config) {
	return func(c *Config) { c.DataDir, c.Persistence, c.Fsync = dir, "on", fsync }
}

// stopNow stops srv and fails the test if it does not stop cleanly.
func stopNow(t *testing.T, srv *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	require.NoError(t, srv.Stop(ctx))
}

// TestRestartKeepsState: after a graceful stop and a start on the same data
// directory, every timer is there with its due tick, interval, repeat
// state, fired count, pause and data; an unbound receiver's backlog and its
// sequence numbers continue; tw-time, speed and frozen are as they were;
// and the timers go on firing where they were.
func TestRestartKeepsState(t *testing.T) {
	for _, fsync := range []string{"always", "everysec", "no"} {
		t.Run(fsync, func(t *testing.T) {
			dir := t.TempDir()
			srv := newServer(t, durable(dir, fsync))
			c := helloClient(t, srv, "before")
			c.bind(1, false)
			c.add(protocol.Request{Receiver: 1, Tid: 1, After: 5, Every: 3, Repeat: 4, Data: []byte("x")})
			c.add(protocol.Request{Receiver: 1, Tid: 2, At: 1100})
			c.add(protocol.Request{Receiver: 2, Tid: 3, After: 2, Repeat: 1, Data: []byte("for the backlog")})
			c.add(protocol.Request{Receiver: 2, Tid: 4, After: 50})
			c.uints(protocol.Request{Op: protocol.OpPause, Receiver: 2, Tid: 4})
			assert.Equal(t, []uint64{1008, 3}, c.ff(8)) // tid 1 fired at 1005 and 1008, tid 3 at 1002 into 2's backlog
			require.Len(t, c.fires(), 2)
			c.uints(protocol.Request{Op: protocol.OpSetSpeed, Speed: 2})
			before := map[uint64][]protocol.Timer{1: c.list(1), 2: c.list(2)}
			stats := c.stats()
			stopNow(t, srv)

			srv = startServer(t, durable(dir, fsync))
			c = helloClient(t, srv, "after")
			assert.Equal(t, before[1], c.list(1))
			assert.Equal(t, before[2], c.list(2))
			got := c.stats()
			assert.Equal(t, stats.Now, got.Now, "tw-time (frozen) is where it was")
			assert.Equal(t, stats.Timers, got.Timers)
			assert.Equal(t, stats.FiredTotal, got.FiredTotal)
			assert.Equal(t, 2.0, got.Speed)
			assert.True(t, got.Frozen)
			backlog, dropped := c.bind(2, false)
			assert.Equal(t, []uint64{1, 0}, []uint64{backlog, dropped}, "the backlog survived")
			c.bind(1, false)
			c.ff(10)             // to 1018: tid 1 fires at 1011 and 1014 (its last), tid 2 not yet
			var seen [][3]uint64 // receiver, tid, fired
			for _, f := range c.fires() {
				seen = append(seen, [3]uint64{f.Receiver, f.Tid, f.Fired})
			}
			assert.Equal(t, [][3]uint64{{2, 3, 1}, {1, 1, 3}, {1, 1, 4}}, seen)
		})
	}
}
