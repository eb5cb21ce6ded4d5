package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/session"
)

// A fast-forward over many busy ticks reports its progress in the log while
// other sessions are served.
func TestFastForwardProgress(t *testing.T) {
	old := progressEvery
	progressEvery = time.Millisecond // the fast-forward below takes hundreds of turns: far longer, however fast the machine
	t.Cleanup(func() { progressEvery = old })
	var logs lockedBuffer
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: t.TempDir(),
		MaxFiresPerTurn: 1000}
	srv := runLogged(t, cfg, &logs)

	admin := helloClient(t, srv, "admin")
	admin.add(protocol.Request{Receiver: 1, Tid: 1, After: 1}) // every tick, into a backlog
	ticks := uint64(2_000_000)
	if testing.Short() {
		ticks = 300_000
	}
	began := time.Now()
	id := admin.send(protocol.Request{Op: protocol.OpFastForward, Ticks: ticks})
	other := helloClient(t, srv, "other")
	pings := 0
	for !strings.Contains(logs.String(), "fast-forward in progress") {
		start := time.Now()
		other.ping()
		require.Less(t, time.Since(start), time.Second, "another session waited for the fast-forward")
		pings++
		require.Less(t, pings, 100_000, "no progress report")
	}
	line := logs.String()
	line = line[strings.Index(line, "fast-forward in progress"):]
	line = line[:strings.IndexByte(line, '\n')]
	for _, key := range []string{"done=", "total=", "unit=ticks", "percent=", "rate_per_s=", "eta=", "fired="} {
		require.Contains(t, line, key)
	}
	// The reply comes once every tick is fired: hundreds of turns of a
	// thousand firings, each logged, which a loaded -race run may take
	// far more than ioTimeout to get through (the progress report above
	// shows it is under way, not stuck).
	admin.wait = 2 * time.Minute
	m := admin.reply(id)
	require.Equal(t, protocol.KindOK, m.Kind)
	require.Equal(t, []uint64{1000 + ticks, ticks}, okUints(t, protocol.OpFastForward, m))
	t.Logf("a fast-forward of %d busy ticks replied in %v", ticks, time.Since(began).Round(time.Millisecond))
}

// A wheel that falls behind the clock with no fast-forward (tw-time at a
// speed the loop cannot fire at, as after a long downtime) reports its
// catch-up the same way.
func TestCatchUpProgress(t *testing.T) {
	old := progressEvery
	progressEvery = 20 * time.Millisecond
	t.Cleanup(func() { progressEvery = old })
	var logs lockedBuffer
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, Persistence: "off",
		DataDir: t.TempDir(), MaxFiresPerTurn: 100}
	srv := runLogged(t, cfg, &logs)
	admin := helloClient(t, srv, "admin")
	for tid := range uint64(50) {
		admin.add(protocol.Request{Receiver: 1, Tid: tid + 1, After: 1}) // every tick, forever
	}
	admin.call(protocol.Request{Op: protocol.OpSetSpeed, Speed: 1e6})
	admin.call(protocol.Request{Op: protocol.OpResumeSync})
	for pings := 0; !strings.Contains(logs.String(), `msg="tw-time catching up"`); pings++ {
		admin.ping() // served meanwhile
		require.Less(t, pings, 100_000, "no progress report")
	}
	require.NotContains(t, logs.String(), "fast-forward in progress")
	require.Regexp(t, `msg="tw-time catching up" done=\d+ total=\d+ unit=ticks`, logs.String())
}

// TestFreezeStopsFastForward: freeze from another session stops a
// fast-forward that would run for years (toward the bound, over a timer
// firing every tick) where the wheel is: both replies name that tick, the
// log says so, tw-time stays there frozen, and a restart on the log comes
// back to it.
func TestFreezeStopsFastForward(t *testing.T) {
	var logs lockedBuffer
	cfg := Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1000, AdminToken: testAdminToken, DataDir: t.TempDir(),
		MaxFiresPerTurn: 100, Downtime: "pause"}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	admin := helloClient(t, srv, "admin")
	admin.add(protocol.Request{Receiver: 1, Tid: 1, After: 1, Every: 1}) // every tick, into a backlog
	id := admin.send(protocol.Request{Op: protocol.OpFastForward, Ticks: session.MaxFastForwardTick - 1000})
	other := helloClient(t, srv, "other")
	waitUntil(t, "the fast-forward to fire", func() bool { return other.stats().FiredTotal > 1000 })
	v := other.uints(protocol.Request{Op: protocol.OpFreeze})
	require.Len(t, v, 1)
	at := v[0]
	require.Less(t, at, uint64(session.MaxFastForwardTick))
	m := admin.reply(id)
	require.Equal(t, protocol.KindOK, m.Kind, "%s %s", m.Code, m.Text)
	got := okUints(t, protocol.OpFastForward, m)
	require.Equal(t, at, got[0], "the fast-forward's reply says where it stopped")
	require.Contains(t, logs.String(), fmt.Sprintf(`msg="fast-forward stopped by freeze" at=%d`, at))
	st := other.stats()
	require.True(t, st.Frozen)
	require.Equal(t, at, st.Now)
	require.Equal(t, at+10, other.add(protocol.Request{Receiver: 2, Tid: 1, After: 10}))

	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	require.NoError(t, srv.Stop(ctx))
	srv = runLogged(t, cfg, &logs)
	again := helloClient(t, srv, "again")
	require.Equal(t, at, again.ping(), "a restart comes back where the fast-forward stopped")
}
