package server

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestStartFlagsIgnoredOnState: start_tick (-start-tick) and frozen
// (-frozen) set where tw-time starts on a new state only. A start on a data
// dir that holds a state that no longer matches them says so at warn level,
// naming the key and flag, instead of silently running on (the README's
// tour run a second time); a start whose state matches them says nothing.
func TestStartFlagsIgnoredOnState(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Server, string) {
		var logs lockedBuffer
		cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: dir,
			Persistence: "on", Fsync: "always"}
		srv, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		require.NoError(t, err)
		require.NoError(t, srv.Start())
		return srv, logs.String()
	}

	srv, logs := start() // a new state: both are followed
	assert.NotContains(t, logs, "level=WARN")
	c := helloClient(t, srv, "admin")
	c.ff(5)
	c.conn.Close()
	stopNow(t, srv)

	srv, logs = start() // still frozen at 1005: -frozen matches, -start-tick 1000 does not
	assert.NotContains(t, logs, "frozen (-frozen)")
	assert.Contains(t, logs, `level=WARN msg="start_tick (-start-tick) ignored: the data dir holds a state`)
	assert.Contains(t, logs, "start_tick=1000 tw_time=1005")
	c = helloClient(t, srv, "admin")
	c.call(protocol.Request{Op: protocol.OpResumeSync}) // tw-time follows the clock again
	c.conn.Close()
	stopNow(t, srv)

	srv, logs = start()
	defer stopNow(t, srv)
	assert.Contains(t, logs, `level=WARN msg="frozen (-frozen) ignored: the data dir holds a state`)
	assert.Contains(t, logs, `level=WARN msg="start_tick (-start-tick) ignored`)
	c = helloClient(t, srv, "admin")
	defer c.conn.Close()
	assert.False(t, c.stats().Frozen, "the recorded state (running) is kept")
}
