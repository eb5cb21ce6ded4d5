package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server/journal"
)

// logFigures reads the log's record count, bytes and fsyncs on the loop.
func logFigures(t *testing.T, srv *Server) (st journal.Stats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	require.NoError(t, srv.onLoop(ctx, func() { st = srv.persist.j.Stats() }))
	return st
}

// TestFloodThatChangesNothingWritesNoLog: with fsync always and tw-time
// running, a flood of requests before hello, failed hellos on fresh
// connections, and refused adds, gets and cancels from a session that
// said hello (it binds nothing) write nothing to the log and fsync
// nothing. The one record the server keeps writing meanwhile is the
// once-a-second note of the wall-clock time (with the advance of tw-time
// it carries), so the log may grow by that much and no more. Before, each
// turn recorded its advance and its requests' reply lengths, a refused
// add its payload, and each hello waited for an fsync.
func TestFloodThatChangesNothingWritesNoLog(t *testing.T) {
	srv := startServer(t, func(c *Config) {
		durable(t.TempDir(), "always")(c)
		c.Frozen = false
		c.Limits.MaxData = 16
	})
	good := helloToken(t, srv, "quiet", "") // its opening is recorded: it was told its id
	good.ping()
	before := logFigures(t, srv)
	began := time.Now()

	const n = 2000
	pre := dial(t, srv) // never says hello
	var flood []byte
	for i := range n {
		flood = protocol.AppendRequest(flood, &protocol.Request{Op: protocol.OpPing, ID: uint64(i + 1)})
	}
	pre.write(flood)
	for range n {
		m, err := pre.read()
		require.NoError(t, err)
		require.Equal(t, protocol.CodeHelloRequired, m.Code)
	}

	for range 20 { // three failed hellos each, then closed
		c := dial(t, srv)
		for range 3 {
			require.Equal(t, protocol.CodeUnauthorized, c.call(protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Token: "wrong"}).Code)
		}
		c.readUntilClosed()
	}

	flood = flood[:0]
	for i := range n {
		reqs := []protocol.Request{
			{Op: protocol.OpAdd, Receiver: 1, Tid: uint64(i), After: 100, Data: make([]byte, 64)}, // max_data
			{Op: protocol.OpGet, Receiver: 1, Tid: uint64(i)},                                     // not found
			{Op: protocol.OpCancel, Receiver: 1, Tid: uint64(i)},                                  // not found
		}
		for _, r := range reqs {
			good.id++
			r.ID = good.id
			flood = protocol.AppendRequest(flood, &r)
		}
	}
	good.write(flood)
	for range 3 * n {
		m, err := good.read()
		require.NoError(t, err)
		require.Equal(t, protocol.KindError, m.Kind)
	}
	good.ping()

	after := logFigures(t, srv)
	seconds := uint64(time.Since(began)/time.Second) + 1
	records := after.LastIndex - before.LastIndex
	t.Logf("%d requests in %v: %d records, %d bytes of log, %d fsyncs", 5*n+60, time.Since(began), records,
		after.LogBytes-before.LogBytes, after.Syncs-before.Syncs)
	require.Zero(t, after.Syncs-before.Syncs, "fsyncs")
	require.LessOrEqual(t, records, seconds, "records beyond the once-a-second wall-clock note")
	require.LessOrEqual(t, after.LogBytes-before.LogBytes, int64(64*seconds), "log bytes beyond the wall-clock notes")
}
