package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestCrashMissedPolicies: a server running tw-time at 60× (10 ms ticks,
// downtime catch-up) is killed with SIGKILL and restarted 3 s later: 3
// minutes (18000 ticks) of tw-time fell in the downtime. Six repeating
// timers, an interval one (every 600 ticks) and a cron one (every
// minute) for each policy, then deliver: all, every missed firing in
// order, late; once, one late firing then the next on schedule after the
// restart; skip, nothing until the next on schedule after the restart.
// Fired counts deliveries.
func TestCrashMissedPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 s downtime")
	}
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-fsync", "always", "-tick", "10ms", "-downtime", "catch-up"}
	p := startProc(t, args...)
	c, err := dialWire(p.addr, "before", procToken)
	require.NoError(t, err)
	_, err = c.uints(protocol.Request{Op: protocol.OpSetSpeed, Speed: 60})
	require.NoError(t, err)
	// The timers are added while tw-time is frozen, so that however long
	// the adds take (six fsyncs), the first interval firings are still
	// 600 ticks (0.1 s at 60x) ahead when the clock runs again, just before
	// the kill. (With the clock running, a loaded machine took longer than
	// 0.1 s over the adds and the first firing came before the kill: "the
	// interval timers are due after the kill" failed 1 run in 10.)
	_, err = c.uints(protocol.Request{Op: protocol.OpFreeze})
	require.NoError(t, err)
	const period, minute = 600, 6000
	policies := []uint64{protocol.MissedAll, protocol.MissedOnce, protocol.MissedSkip}
	first := map[uint64]uint64{}
	for i, m := range policies {
		tid := uint64(1 + i)
		v, err := c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: tid, After: period, Every: period, Missed: m})
		require.NoError(t, err)
		first[tid] = v[0]
		v, err = c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 10 + tid, Schedule: "* * * * *", Missed: m})
		require.NoError(t, err)
		first[10+tid] = v[0]
	}
	_, err = c.uints(protocol.Request{Op: protocol.OpResumeSync})
	require.NoError(t, err)
	v, err := c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	before := v[0]
	p.kill()
	time.Sleep(3 * time.Second) // 18000 ticks of tw-time at 60x
	require.Less(t, before, first[1], "the interval timers are due after the kill")

	p = startProc(t, args...)
	c, err = dialWire(p.addr, "after", procToken)
	require.NoError(t, err)
	v, err = c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	after := v[0]
	_, err = c.uints(protocol.Request{Op: protocol.OpBind, Receiver: 7})
	require.NoError(t, err)
	time.Sleep(2500 * time.Millisecond) // 150 s of tw-time on schedule: two whole minutes
	_, err = c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	p.term()

	byTid := map[uint64][]protocol.Fire{}
	for _, f := range c.fires {
		if f.Tick > before { // a cron firing may come before the kill
			byTid[f.Tid] = append(byTid[f.Tid], f)
		}
	}
	t.Logf("before %d, after the restart %d (%d ticks)", before, after, after-before)
	for i, m := range policies {
		checkMissed(t, byTid[1+uint64(i)], m, period, before, first[1+uint64(i)])
		checkMissed(t, byTid[11+uint64(i)], m, minute, before, 0)
	}
}

// checkMissed checks the firings after before of one timer every step
// ticks under policy m, down 18000 ticks after before. grid is the first
// due tick of an interval timer, 0 for a cron timer (on whole minutes).
func checkMissed(t *testing.T, fs []protocol.Fire, m, step, before, grid uint64) {
	t.Helper()
	const downTicks = 18000
	require.GreaterOrEqual(t, len(fs), 2, "missed %d every %d", m, step)
	name := fmt.Sprintf("tid %d, missed %d", fs[0].Tid, m)
	for j := 1; j < len(fs); j++ {
		assert.Equal(t, fs[j-1].Fired+1, fs[j].Fired, "%s: fired counts deliveries", name)
		assert.Zero(t, (fs[j].Tick-fs[0].Tick)%step, "%s: on schedule", name)
	}
	gap := fs[1].Tick - fs[0].Tick
	switch m {
	case protocol.MissedAll:
		assert.Equal(t, step, gap, "%s: every firing", name)
		assert.Positive(t, fs[0].Late, "%s: the first missed firing is late", name)
		assert.Positive(t, fs[1].Late, "%s: so is the second", name)
	case protocol.MissedOnce:
		assert.Positive(t, fs[0].Late, "%s: one late firing", name)
		assert.GreaterOrEqual(t, gap, uint64(downTicks)-step, "%s: then back on schedule after the restart", name)
	case protocol.MissedSkip:
		assert.GreaterOrEqual(t, fs[0].Tick, before+downTicks, "%s: nothing in the downtime", name)
		assert.Equal(t, step, gap, "%s: on schedule after it", name)
	}
	if grid != 0 {
		assert.Zero(t, (fs[0].Tick-grid)%step, "%s: on its grid", name)
	} else {
		assert.Zero(t, fs[0].Tick%step, "%s: on a whole minute", name)
	}
}
