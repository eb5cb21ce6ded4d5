package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// snapshot.every_replay bounds a restart's replay by the loop's time, where
// the counts do not: with every_records, every_bytes and every_firings out
// of reach, adds alone start a snapshot once the turns that logged them
// took the loop every_replay; with it off, or within min_interval of the
// first snapshot, the same adds start none.
func TestEveryReplayStartsASnapshot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		every    time.Duration
		interval time.Duration
		want     bool
	}{
		{"on", 2 * time.Millisecond, -1, true},
		{"off", -1, -1, false},
		{"within min_interval", 2 * time.Millisecond, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, written := replayTimeServer(t, tc.every, tc.interval)
			require.Equal(t, 1, written(), "a new state's first snapshot")
			c := helloClient(t, srv, "c")
			// A turn of the loop costs a microsecond or two: 2 ms of them
			// is a thousand adds or more, fewer under -race. (With 20 ms,
			// 10,000 adds were not enough on a fast host.)
			const most = 10_000
			tid := uint64(0)
			for ; tid < most && written() == 1; tid++ {
				c.add(protocol.Request{Receiver: 1 + tid%100, Tid: tid, After: 1000})
			}
			if !tc.want {
				time.Sleep(200 * time.Millisecond) // one would have been started by now
				require.Equal(t, 1, written(), "a snapshot with every_replay off")
				return
			}
			require.Eventually(t, func() bool { return written() == 2 }, 10*time.Second, 5*time.Millisecond,
				"no snapshot after %d adds", tid)
			t.Logf("a snapshot after %d adds", tid)
		})
	}
}

// What a turn run for an admin (a reload, a fast-forward) records costs
// from when it began, not from the last turn: a reload after 5 s of
// idleness (a quiet server has no turn after its first 3 s) starts no
// snapshot with every_replay at 500 ms (it did: the idle seconds counted
// as the reload's work).
func TestEveryReplayCountsNoIdleTime(t *testing.T) {
	srv, cfg, written := replayTimeServer(t, 500*time.Millisecond, -1)
	c := helloClient(t, srv, "c")
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 1000})
	time.Sleep(5 * time.Second)
	next := cfg
	next.Limits.MaxTimers = 1_000_000
	_, err := srv.Reload(context.Background(), next)
	require.NoError(t, err)
	time.Sleep(2 * time.Second) // a snapshot the reload started would be written by now
	require.Equal(t, 1, written(), "a snapshot after a reload: the idle seconds counted")
}

// replayTimeServer starts a durable server whose snapshots only
// snapshot.every_replay (every) can start, min_interval (interval) apart,
// and returns it, its config and a count of the snapshots it has written.
// Its encoder runs at normal priority: at the default, idle, it waits up
// to idle_max (30 s) while other processes keep the CPUs busy, as a CI
// run's other test packages do (a snapshot this test started was not
// written within 10 s there).
func replayTimeServer(t *testing.T, every, interval time.Duration) (*Server, Config, func() int) {
	t.Helper()
	logs := &lockedBuffer{}
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken,
		DataDir: t.TempDir(), Snapshot: SnapshotPolicy{EveryRecords: 1 << 30, EveryBytes: 1 << 40,
			EveryFirings: 1 << 50, MinInterval: interval, EveryReplay: every, Priority: SnapshotNormal}}
	srv := runLogged(t, cfg, logs)
	return srv, cfg, func() int { return strings.Count(logs.String(), `msg="snapshot written"`) }
}
