package server

import (
	"context"
	"errors"
	"strings"
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

// A reloaded snapshot.min_interval holds from the last snapshot's start:
// raised, no snapshot comes at the time the old interval had set (one
// did, a plain 10 s after the last, when the scale scenario turned
// snapshots off to measure lateness without one). The encoder runs at
// normal priority: at idle it can wait seconds while a CI run's other
// packages keep the CPUs busy (replayTimeServer).
func TestReloadMinIntervalHoldsFromTheLastSnapshot(t *testing.T) {
	var logs lockedBuffer
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: t.TempDir(),
		Snapshot: SnapshotPolicy{EveryRecords: 1, MinInterval: 200 * time.Millisecond, Priority: SnapshotNormal}}
	srv := runLogged(t, cfg, &logs)
	c := helloClient(t, srv, "c")
	written := func() int { return strings.Count(logs.String(), `msg="snapshot written"`) }
	tid := uint64(0)
	addFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			tid++
			c.add(protocol.Request{Receiver: 1, Tid: tid, After: 1000})
		}
	}
	addFor(500 * time.Millisecond) // snapshots every 200 ms
	// One may still be running (a snapshot on a busy machine takes
	// longer than a turn), or be due: records came within
	// min_interval of the last, and the loop looks again once a second.
	// Wait until none was written for 1.2 s.
	before := written()
	for settled := time.Now(); time.Since(settled) < 1200*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if n := written(); n != before {
			before, settled = n, time.Now()
		}
	}
	require.GreaterOrEqual(t, before, 2, "snapshots every 200 ms while adding")

	next := cfg
	next.Snapshot.MinInterval = time.Hour
	_, err := srv.Reload(context.Background(), next)
	require.NoError(t, err)
	addFor(600 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, before, written(), "snapshots written after min_interval was raised to 1h")

	next.Snapshot.MinInterval = -1 // none: the next record may start one
	_, err = srv.Reload(context.Background(), next)
	require.NoError(t, err)
	addFor(300 * time.Millisecond)
	require.Eventually(t, func() bool { return written() > before }, 5*time.Second, 20*time.Millisecond, "no snapshot after min_interval was lowered")
}
