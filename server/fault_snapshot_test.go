package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestFaultSnapshotKilled: the real binary, holding many timers (300k;
// 30k with -short) and taking a snapshot every 20 log records, is killed
// with SIGKILL while a snapshot is being written (its .tmp file has bytes),
// as timers are still being added. The restart drops the unfinished
// snapshot and recovers every acknowledged timer from the previous
// snapshot and the log; it goes on from there for another kill.
func TestFaultSnapshotKilled(t *testing.T) {
	total := 300_000
	if testing.Short() {
		total = 30_000
	}
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "tickwheel.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("snapshot:\n  every_records: 20\n  min_interval: -1s\n"), 0o600))
	args := []string{"-config", cfg, "-data-dir", dir, "-fsync", "everysec", "-frozen", "-start-tick", "1000"}
	st := &snapAdds{acked: make([]bool, 1)} // by tid, from 1
	midSnapshot, tmpLeft := 0, false
	for round := 0; round < 6 && (midSnapshot < 2 || st.count < total); round++ {
		p := startProc(t, args...)
		if round > 0 {
			st.check(t, p)
		}
		if tmpLeft {
			p.logged(t, "removing a snapshot that was never committed")
		}
		st.addUntilKilled(t, p, dir, total)
		tmp := snapshotTmp(dir)
		if tmpLeft = tmp != ""; tmpLeft {
			midSnapshot++
			fi, err := os.Stat(tmp)
			require.NoError(t, err)
			t.Logf("round %d: killed with %d timers acknowledged while writing %s (%d bytes written)", round, st.count,
				filepath.Base(tmp), fi.Size())
		} else {
			t.Logf("round %d: killed with %d timers acknowledged, just after a snapshot was committed", round, st.count)
		}
	}
	require.Positive(t, midSnapshot, "no kill landed in the middle of a snapshot")
	p := startProc(t, args...)
	st.check(t, p)
	if tmpLeft {
		p.logged(t, "removing a snapshot that was never committed")
	}
	p.term()
}

// snapAdds are the adds of TestFaultSnapshotKilled: of tid 1 to sent, each
// with the same delay; acked[tid] says it was acknowledged (or found after
// a restart, when in flight at the kill).
type snapAdds struct {
	acked []bool
	count int // acknowledged
	sent  uint64
}

// snapshotTmp returns a snapshot file being written in data directory dir,
// or "".
func snapshotTmp(dir string) string {
	tmps, _ := filepath.Glob(filepath.Join(dir, logDir, "*.snap.tmp"))
	if len(tmps) == 0 {
		return ""
	}
	return tmps[0]
}

// snapshotWriting reports whether a snapshot of data directory dir has
// bytes written and is not committed yet.
func snapshotWriting(dir string) bool {
	tmp := snapshotTmp(dir)
	if tmp == "" {
		return false
	}
	fi, err := os.Stat(tmp)
	return err == nil && fi.Size() > 0
}

// addUntilKilled adds timers from tid sent+1 on, 1000 requests to a
// write, and kills the server as soon as it is seen writing a snapshot
// (bytes in its .tmp file) once at least a third of total more timers are
// acknowledged (or total are).
func (st *snapAdds) addUntilKilled(t *testing.T, p *proc, dir string, total int) {
	c, err := dialWire(p.addr, "adder", "")
	require.NoError(t, err)
	defer c.close()
	var count atomic.Int64
	count.Store(int64(st.count))
	armAt := int64(min(st.count+total/3, total))
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for p.alive() {
			if count.Load() >= armAt && snapshotWriting(dir) {
				p.kill()
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for err == nil {
		sent := st.sent
		var buf []byte
		first := sent + 1
		for range 1000 {
			sent++
			buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpAdd, ID: sent, Receiver: snapReceiver(sent),
				Tid: sent, After: 1_000_000})
		}
		c.id, st.sent = sent, sent
		st.acked = append(st.acked, make([]bool, 1000)...)
		c.c.SetWriteDeadline(time.Now().Add(c.timeout))
		if _, err = c.c.Write(buf); err != nil {
			break
		}
		for id := first; id <= sent; id++ {
			var m protocol.Message
			if m, err = c.reply(id); err != nil {
				break
			}
			require.Equal(t, protocol.KindOK, m.Kind, "add %d: %s %s", id, m.Code, m.Text)
			st.acked[id], st.count = true, st.count+1
			count.Add(1)
		}
	}
	<-killed
	require.NotErrorIs(t, err, errTimeout, "the server stopped answering before the kill")
}

// snapReceiver spreads the timers over receivers, below the per-receiver limit.
func snapReceiver(tid uint64) uint64 { return 1 + tid%16 }

// check checks that the server holds every acknowledged timer, each as
// added, and none that was not sent. A timer in flight at the kill that is
// there counts as acknowledged from now on.
func (st *snapAdds) check(t *testing.T, p *proc) {
	t.Helper()
	c, err := dialWire(p.addr, "check", procToken)
	require.NoError(t, err)
	defer c.close()
	seen := make([]bool, st.sent+1)
	n := 0
	for r := uint64(1); r <= 16; r++ {
		ts, err := c.listAll(r)
		require.NoError(t, err)
		for _, tm := range ts {
			ok := tm.Tid <= st.sent && snapReceiver(tm.Tid) == r && tm.Due == 1000+1_000_000 && !seen[tm.Tid]
			require.True(t, ok, "unexpected timer %+v", tm)
			seen[tm.Tid] = true
			n++
		}
	}
	var missing []string
	for tid := range st.acked {
		if st.acked[tid] && !seen[tid] && len(missing) < 10 {
			missing = append(missing, fmt.Sprint(tid))
		}
	}
	if len(missing) > 0 {
		p.logTail()
		t.Fatalf("%d timers after the restart, %d acknowledged; missing tids %s...", n, st.count, strings.Join(missing, " "))
	}
	for tid, ok := range seen {
		if ok && !st.acked[tid] {
			st.acked[tid] = true
			st.count++
		}
	}
}
