package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// Recovery is bounded by the state, not by its history (issue 26): a
// fast-forward of 50 timers firing every tick, then kill -9. A server
// that took no snapshot after it (every_firings too high, as before it
// existed) leaves a log whose replay redoes every firing; the restart that
// replays it takes a snapshot before it serves, so a second kill -9 and
// restart replays none. And a fast-forward whose turn fired every_firings
// triggers a snapshot once it is done: a kill -9 after it replays none.
// What was replayed is read from the "state recovered" line, not timed.
func TestFastForwardReplayedOnce(t *testing.T) {
	const timers, ticks = 50, 100_000 // 5,000,000 firings
	const firings = timers * ticks
	dir := t.TempDir()
	config := func(everyFirings int64) string {
		path := filepath.Join(t.TempDir(), "tickwheel.yaml")
		// One turn does the whole fast-forward (its replay cost is one
		// record's); min_interval does not hold back a costly turn's
		// snapshot; every_replay (TestEveryReplayAfterARestart) is off.
		body := "max_fires_per_turn: 100000000\nsnapshot:\n  priority: normal\n  min_interval: 1h\n  every_replay: -1s\n  every_firings: " +
			strconv.FormatInt(everyFirings, 10) + "\n"
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return path
	}
	args := func(conf string) []string {
		return []string{"-config", conf, "-data-dir", dir, "-fsync", "always", "-frozen", "-start-tick", "1000"}
	}
	bounded := config(1_000_000)

	// A server that takes no snapshot for firings.
	p := startProc(t, args(config(1<<50))...)
	w, err := dialWire(p.addr, "ff", procToken)
	require.NoError(t, err)
	for tid := uint64(1); tid <= timers; tid++ {
		_, err := w.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 1, Every: 1})
		require.NoError(t, err)
	}
	fastForward(t, w, ticks, firings)
	w.close()
	p.kill()

	// Its log replays every firing once, and a snapshot is taken before serving...
	p, took := startTimed(t, args(bounded))
	require.Equal(t, uint64(firings), replayedFirings(t, p), "the first restart redoes the fast-forward")
	p.logged(t, "a snapshot before serving")
	t.Logf("restart replaying %d firings: %v (exec to listening)", firings, took)
	p.kill()

	// ...so a second kill -9 replays none of them.
	p, took = startTimed(t, args(bounded))
	require.Zero(t, replayedFirings(t, p), "the second restart replayed the fast-forward again")
	t.Logf("second restart: %v", took)

	// A fast-forward of every_firings or more triggers a snapshot when its turn is done.
	w, err = dialWire(p.addr, "ff", procToken)
	require.NoError(t, err)
	written := strings.Count(p.stderr.String(), "snapshot written")
	fastForward(t, w, ticks, firings)
	require.Eventually(t, func() bool { return strings.Count(p.stderr.String(), "snapshot written") > written },
		20*time.Second, time.Millisecond, "no snapshot after the fast-forward:\n%s", p.stderr)
	w.close()
	p.kill()
	p, _ = startTimed(t, args(bounded))
	require.Zero(t, replayedFirings(t, p), "the restart after a snapshotted fast-forward replayed it")
	s, err := dialAndStats(p)
	require.NoError(t, err)
	require.Equal(t, uint64(1000+2*ticks), s.Now, "tw-time after both fast-forwards")
	require.Equal(t, uint64(timers), s.Timers)
	p.term()
}

// fastForward moves tw-time on by ticks and checks the firings the reply reports.
func fastForward(t *testing.T, w *wire, ticks, firings uint64) {
	t.Helper()
	w.timeout = 2 * time.Minute
	r, err := w.uints(protocol.Request{Op: protocol.OpFastForward, Ticks: ticks})
	require.NoError(t, err)
	require.Len(t, r, 2)
	require.Equal(t, firings, r[1], "firings the fast-forward reports")
}

// startTimed starts the server and returns it with the time from exec to
// listening (logged, not asserted).
func startTimed(t *testing.T, args []string) (*proc, time.Duration) {
	t.Helper()
	began := time.Now()
	p := startProc(t, args...)
	return p, time.Since(began)
}

var firingsReplayed = regexp.MustCompile(`state recovered.* firings_replayed=(\d+)`)

// replayedFirings reads the firings the start-up replayed from its log.
func replayedFirings(t *testing.T, p *proc) uint64 {
	t.Helper()
	p.logged(t, "state recovered")
	m := firingsReplayed.FindStringSubmatch(p.stderr.String())
	require.NotNil(t, m, p.stderr.String())
	n, err := strconv.ParseUint(m[1], 10, 64)
	require.NoError(t, err)
	return n
}

// dialAndStats returns the stats of the server p.
func dialAndStats(p *proc) (protocol.Stats, error) {
	w, err := dialWire(p.addr, "stats", procToken)
	if err != nil {
		return protocol.Stats{}, err
	}
	defer w.close()
	return w.stats()
}

// A restart whose replay took snapshot.every_replay starts a snapshot as it
// serves (every_firings out of reach: not before), so a second kill -9 and
// restart replays nothing.
func TestEveryReplayAfterARestart(t *testing.T) {
	const timers, ticks = 50, 20_000
	dir, config := loggedFastForward(t, timers, ticks)

	// Replaying a million firings takes more than a millisecond.
	p := startProc(t, config("1ms")...)
	require.Equal(t, uint64(timers*ticks), replayedFirings(t, p))
	p.logged(t, "a snapshot starts as the server serves")
	require.Contains(t, p.stderr.String(), "mark_written=true")
	require.NotContains(t, p.stderr.String(), "a snapshot before serving")
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "snapshot written") },
		20*time.Second, time.Millisecond, "no snapshot after the long replay:\n%s", p.stderr)
	require.NoFileExists(t, filepath.Join(dir, recoveryMarkName), "the snapshot's commit removes the recovery mark")
	p.kill()

	p = startProc(t, config("1ms")...)
	require.Zero(t, replayedFirings(t, p), "the second restart replayed the fast-forward again")
	s, err := dialAndStats(p)
	require.NoError(t, err)
	require.Equal(t, uint64(1000+ticks), s.Now)
	require.Equal(t, uint64(timers), s.Timers)
	p.term()
}

// A crash loop faster than a snapshot (recoverymark.go): a start-up whose
// replay took every_replay and that finds the recovery mark, which the
// last such start-up wrote before its snapshot and a commit would have
// removed, writes its snapshot before it serves; the next restart replays
// nothing. And one that finds the mark saying a snapshot before serving
// was tried and never committed serves first. The marks are written here
// as start-ups killed before their snapshots' commits leave them
// (TestEveryReplayAfterARestart checks that a start-up writes one and that
// the commit removes it): a kill timed into a snapshot of 50 timers would
// be a race.
func TestEveryReplayCrashLoop(t *testing.T) {
	const timers, ticks = 50, 20_000 // 1,000,000 firings
	dir, config := loggedFastForward(t, timers, ticks)
	mark := filepath.Join(dir, recoveryMarkName)
	require.NoFileExists(t, mark, "no start-up replayed long yet")
	require.NoError(t, os.WriteFile(mark, []byte(markAsServing+"\n"), 0o600))

	p := startProc(t, config("1ms")...) // returns once it listens
	require.NoFileExists(t, mark, "the snapshot is committed, and the mark removed, before the server listens")
	require.Equal(t, uint64(timers*ticks), replayedFirings(t, p))
	p.logged(t, "snapshot written")
	out := p.stderr.String()
	before := strings.Index(out, "a snapshot before serving")
	require.NotEqual(t, -1, before, "the crash loop's start-up did not snapshot first:\n%s", out)
	require.NotContains(t, out, "a snapshot starts as the server serves")
	require.Greater(t, strings.Index(out, "snapshot written"), before, out)
	p.kill()

	p = startProc(t, config("1ms")...)
	require.Zero(t, replayedFirings(t, p), "the restart after the crash loop's snapshot replayed the fast-forward again")
	require.NoFileExists(t, mark)
	p.kill()

	// A snapshot before serving that never committed: the next serves first.
	p = startProc(t, config("-1s")...)
	w, err := dialWire(p.addr, "ff", procToken)
	require.NoError(t, err)
	fastForward(t, w, ticks, timers*ticks)
	w.close()
	p.kill()
	require.NoError(t, os.WriteFile(mark, []byte(markBefore+"\n"), 0o600))
	p = startProc(t, config("1ms")...)
	require.Equal(t, uint64(timers*ticks), replayedFirings(t, p))
	servedFirst(t, p, mark, "snapshot before serving was never written either; this one serves first")
	s, err := dialAndStats(p)
	require.NoError(t, err)
	require.Equal(t, uint64(1000+2*ticks), s.Now)
	require.Equal(t, uint64(timers), s.Timers)
	p.term()
}

// The rent-or-buy side of the crash loop's rule (recoverymark.go): a
// start-up that finds the mark but whose replay took less than its
// restore before it serves first, as writing a snapshot would cost more
// than replaying again; the snapshot's commit removes the mark.
func TestEveryReplayCrashLoopShortReplay(t *testing.T) {
	dir, config := loggedFastForward(t, 1, 1) // a few records: microseconds of replay
	mark := filepath.Join(dir, recoveryMarkName)
	require.NoError(t, os.WriteFile(mark, []byte(markAsServing+"\n"), 0o600))
	p := startProc(t, config("1ns")...) // every replay is long
	servedFirst(t, p, mark, "replaying again costs less than writing one; this one serves first")
	p.term()
}

// servedFirst checks that start-up p, which found the recovery mark at
// path mark, served first for the reason logged as why, and that its
// snapshot's commit removed the mark.
func servedFirst(t *testing.T, p *proc, mark, why string) {
	t.Helper()
	p.logged(t, "a snapshot starts as the server serves")
	require.Contains(t, p.stderr.String(), why)
	require.NotContains(t, p.stderr.String(), "a snapshot before serving")
	p.logged(t, "snapshot written")
	require.Eventually(t, func() bool { _, err := os.Lstat(mark); return os.IsNotExist(err) }, 5*time.Second, time.Millisecond,
		"the snapshot's commit removes the recovery mark")
}

// A recovery mark in the data directory of a new state (its log deleted)
// goes with the first snapshot, before the server listens.
func TestRecoveryMarkNewState(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, recoveryMarkName)
	require.NoError(t, os.WriteFile(mark, []byte(markAsServing+"\n"), 0o600))
	p := startProc(t, "-data-dir", dir, "-fsync", "always", "-frozen")
	require.NoFileExists(t, mark)
	p.logged(t, "persistence on: a new state")
	p.term()
}

// loggedFastForward runs the binary on a new data directory with
// every_replay off (every count threshold out of reach, min_interval an
// hour), fast-forwards timers timers firing every tick by ticks, and kills
// it: its log holds timers*ticks firings no snapshot covers. config gives
// the arguments of a start on that directory with every_replay set.
func loggedFastForward(t *testing.T, timers, ticks uint64) (dir string, config func(everyReplay string) []string) {
	t.Helper()
	dir = t.TempDir()
	config = func(everyReplay string) []string {
		path := filepath.Join(t.TempDir(), "tickwheel.yaml")
		body := "max_fires_per_turn: 100000000\nsnapshot:\n  priority: normal\n  min_interval: 1h\n  every_firings: 1125899906842624\n" +
			"  every_replay: " + everyReplay + "\n"
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return []string{"-config", path, "-data-dir", dir, "-fsync", "always", "-frozen", "-start-tick", "1000"}
	}
	p := startProc(t, config("-1s")...)
	w, err := dialWire(p.addr, "ff", procToken)
	require.NoError(t, err)
	for tid := uint64(1); tid <= timers; tid++ {
		_, err := w.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: tid, After: 1, Every: 1})
		require.NoError(t, err)
	}
	fastForward(t, w, ticks, timers*ticks)
	w.close()
	p.kill()
	return dir, config
}
