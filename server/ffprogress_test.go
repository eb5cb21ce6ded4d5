package server

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
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
	m := admin.reply(id)
	require.Equal(t, protocol.KindOK, m.Kind)
	require.Equal(t, []uint64{1000 + ticks, ticks}, okUints(t, protocol.OpFastForward, m))
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
