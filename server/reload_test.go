package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// Reload applies the live keys at once (a limit refuses the next add, hello
// reports the new values), logs each change, leaves the other keys for a
// restart, and refuses an invalid config without changing anything.
func TestReload(t *testing.T) {
	var logs lockedBuffer
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: t.TempDir(),
		Limits: Limits{MaxTimersPerReceiver: 3}}
	srv := runLogged(t, cfg, &logs)
	c := helloClient(t, srv, "c")
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 10})
	c.add(protocol.Request{Receiver: 1, Tid: 2, After: 10})

	ctx := context.Background()
	next := cfg
	next.Limits.MaxTimersPerReceiver = 2
	next.Timeouts.Idle = 90 * time.Second
	next.Tick = 20 * time.Millisecond // needs a restart
	next.ClientToken = "a-new-client-token"
	changes, err := srv.Reload(ctx, next)
	require.NoError(t, err)
	require.Equal(t, []Change{
		{Key: "tick", Old: "10ms", New: "20ms"},
		{Key: "client_token", Old: "(hidden)", New: "(hidden)"},
		{Key: "limits.max_timers_per_receiver", Old: "3", New: "2", Live: true},
		{Key: "timeouts.idle", Old: "2m0s", New: "1m30s", Live: true},
	}, changes)
	c.failCode(protocol.CodeLimitExceeded, protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 3, After: 10})
	d := helloClient(t, srv, "d")
	require.Equal(t, uint64(2), d.hello.Limits.MaxTimersPerReceiver)
	require.Equal(t, uint64(90_000), d.hello.Limits.IdleTimeoutMs)
	require.Equal(t, 10*time.Millisecond, srv.Tick())
	out := logs.String()
	require.Contains(t, out, `msg="config reloaded: changed" key=limits.max_timers_per_receiver old=3 new=2`)
	require.Contains(t, out, `msg="config reloaded: this change needs a restart" key=tick running=10ms new=20ms`)
	require.NotContains(t, out, "a-new-client-token")

	// Again: only the key that waits for a restart still differs.
	changes, err = srv.Reload(ctx, next)
	require.NoError(t, err)
	require.Len(t, changes, 2)
	require.False(t, changes[0].Live)

	bad := next
	bad.Limits.MaxTimersPerReceiver = 1
	bad.Limits.MaxFrame = 10
	_, err = srv.Reload(ctx, bad)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "limits.max_frame", ce.Key)
	c.add(protocol.Request{Receiver: 2, Tid: 1, After: 10})
	c.add(protocol.Request{Receiver: 2, Tid: 2, After: 10}) // the limit is still 2
}
