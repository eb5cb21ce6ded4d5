package server

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestDamagedLogRealProcess: the real binary with timers spread over
// snapshots and segments, killed, its log damaged the two ways issue 24
// found:
//   - a flipped bit in a segment the newest snapshot covers: the start
//     refused, and -repair then deleted every later segment. Now it starts
//     with every timer.
//   - the last segment deleted (after more adds): the start went on silently with fewer
//     timers. Now it is refused, naming the missing records and -repair;
//     with -repair it starts, logs the records and timers lost, and keeps
//     the TAIL file that recorded them.
func TestDamagedLogRealProcess(t *testing.T) {
	const timers, more = 1600, 50
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "tickwheel.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("snapshot:\n  every_records: 500\n  min_interval: -1s\n"), 0o600))
	args := []string{"-config", cfg, "-data-dir", dir, "-fsync", "everysec", "-frozen", "-start-tick", "1000"}
	p := startProc(t, args...)
	c, err := dialWire(p.addr, "work", procToken)
	require.NoError(t, err)
	for i := 1; i <= timers; i++ { // one turn, one record each
		m, err := c.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: uint64(i), After: 1 << 20, Data: []byte("x")})
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind, "add %d: %s %s", i, m.Code, m.Text)
	}
	c.close()
	time.Sleep(1500 * time.Millisecond) // a checkpoint after the last add
	p.kill()

	logd := filepath.Join(dir, logDir)
	segs, snaps := logFiles(t, logd)
	require.GreaterOrEqual(t, len(segs), 2, "segments %v", segs)
	require.Len(t, snaps, 2)
	newest := snapIndexOf(t, snaps[1])
	covered := segs[len(segs)-2] // records after the older snapshot, up to the newest one
	st, err := os.Stat(covered)
	require.NoError(t, err)
	require.Positive(t, st.Size())
	flipByte(t, covered, st.Size()/2)

	p = startProc(t, args...)
	p.logged(t, "the snapshot covers")
	requireTimers(t, p, timers)
	c, err = dialWire(p.addr, "work", procToken)
	require.NoError(t, err)
	for i := timers + 1; i <= timers+more; i++ { // too few for a snapshot: they stay in the last segment
		m, err := c.call(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: uint64(i), After: 1 << 20, Data: []byte("x")})
		require.NoError(t, err)
		require.Equal(t, protocol.KindOK, m.Kind, "add %d: %s %s", i, m.Code, m.Text)
	}
	c.close()
	// The TAIL file is written by a once-a-second turn and records what
	// everysec's once-a-second fsync has made durable by then: up to two
	// seconds after the last add (1.5 s failed now and then, before and
	// after the snapshot encoder's SCHED_IDLE, TAIL recording the start's
	// record only).
	time.Sleep(2500 * time.Millisecond)
	p.kill()

	segs, snaps = logFiles(t, logd)
	newest = snapIndexOf(t, snaps[len(snaps)-1])
	require.NoError(t, os.Remove(segs[len(segs)-1]))
	_, err = tryStartProc(t, args...)
	require.Error(t, err, "a start on a log whose end is missing")
	msg := err.Error()
	require.Contains(t, msg, "records "+strconv.FormatUint(newest+1, 10)+" to ")
	require.Contains(t, msg, "-repair")
	require.Contains(t, msg, "the server had "+strconv.Itoa(timers+more)+" timers")
	require.NotContains(t, msg, "Options.Repair")

	p = startProc(t, append(args, "-repair")...)
	p.logged(t, "-repair: records were dropped")
	s, err := dialStats(p)
	require.NoError(t, err)
	require.LessOrEqual(t, s.Timers, uint64(timers), "the records after the newest snapshot are gone")
	p.logged(t, "timers_lost="+strconv.FormatUint(timers+more-s.Timers, 10))
	p.logged(t, "first_lost="+strconv.FormatUint(newest+1, 10))
	aside, err := filepath.Glob(filepath.Join(logd, "repaired-*", "TAIL"))
	require.NoError(t, err)
	require.Len(t, aside, 1, "the TAIL that recorded the lost records is kept")
	p.term()
	p = startProc(t, args...) // repaired: no refusal any more
	requireTimers(t, p, int(s.Timers))
	p.term()
}

// logFiles lists the log directory's segments and snapshots, oldest first.
func logFiles(t *testing.T, dir string) (segs, snaps []string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.NoError(t, err)
	snaps, err = filepath.Glob(filepath.Join(dir, "snap-*.snap"))
	require.NoError(t, err)
	sort.Strings(segs)
	sort.Strings(snaps)
	return segs, snaps
}

func snapIndexOf(t *testing.T, path string) uint64 {
	t.Helper()
	s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "snap-"), ".snap")
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return n
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x08
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func dialStats(p *proc) (protocol.Stats, error) {
	c, err := dialWire(p.addr, "check", procToken)
	if err != nil {
		return protocol.Stats{}, err
	}
	defer c.close()
	return c.stats()
}

func requireTimers(t *testing.T, p *proc, n int) {
	t.Helper()
	s, err := dialStats(p)
	require.NoError(t, err)
	require.Equal(t, uint64(n), s.Timers)
}
