package server

import (
	"log/slog"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// Recovery at start-up logs its progress: the snapshot's bytes read and the
// log's records replayed, each with its total, rate and ETA. The log is
// made by the real server, killed with SIGKILL so that no last snapshot
// covers it.
func TestRecoveryProgress(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, "-data-dir", dir, "-frozen", "-fsync", "always")
	w, err := dialWire(p.addr, "filler", procToken)
	require.NoError(t, err)
	const adds = 200
	for i := range adds { // one request per turn: one record each
		_, err := w.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: uint64(i + 1), After: 100})
		require.NoError(t, err)
	}
	w.close()
	p.kill()

	old := progressEvery
	progressEvery = 0 // every update logs
	t.Cleanup(func() { progressEvery = old })
	var logs lockedBuffer
	srv, err := New(Config{Addr: "127.0.0.1:0", AdminToken: procToken, DataDir: dir}, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	srv.closeLog()

	out := logs.String()
	require.Contains(t, out, `msg="recovery: reading the snapshot"`)
	replays := regexp.MustCompile(`msg="recovery: replaying the log" done=(\d+) total=(\d+) unit=records percent=[\d.]+ rate_per_s=[\d.]+ elapsed=\S+ eta=\S+`).
		FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, replays, out)
	last := replays[len(replays)-1]
	require.Equal(t, last[2], last[1], "the last line has done = total")
	require.GreaterOrEqual(t, len(replays), adds, "a line per record with no interval")
	require.Contains(t, out, "state recovered")
}
