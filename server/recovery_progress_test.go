package server

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
	"time"

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
	replays := regexp.MustCompile(`msg="recovery: replaying the log" done=(\d+) total=(\d+) unit=records\+firings percent=[\d.]+ rate_per_s=[\d.]+ elapsed=\S+ eta=\S+`).
		FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, replays, out)
	last := replays[len(replays)-1]
	require.Equal(t, last[2], last[1], "the last line has done = total")
	require.GreaterOrEqual(t, len(replays), adds, "a line per record with no interval")
	require.Contains(t, out, "state recovered")
}

// The replay's ETA follows the firings left to redo, not the records: two
// records of 1,000 firings replayed in a second leave one of 1,000,000,
// about 500 s (counting records, it said 0.5 s, as the 12 s of issue 26's
// 3 min 28 s replay).
func TestReplayETAFollowsFirings(t *testing.T) {
	firings := []uint64{1000, 1000, 1_000_000}
	var total uint64
	for _, f := range firings {
		total += 1 + f
	}
	var buf bytes.Buffer
	var now time.Duration
	m := newReplayMeter(slog.New(slog.NewTextHandler(&buf, nil)), total, time.Second, func() time.Duration { return now })
	m.replayed(firings[0])
	now = time.Second
	m.replayed(firings[1])
	line := buf.String()
	require.Contains(t, line, `msg="recovery: replaying the log" done=2002 total=1002003 unit=records+firings percent=0.1 rate_per_s=2002 elapsed=1s eta=8m20s records=2 firings=2000`)
}
