package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestCrashCatchUp: a server running in real time (10 ms ticks, downtime
// catch-up) is killed with SIGKILL and restarted a second later (0.3 s with
// -short). tw-time must have moved on by the wall-clock time in between
// (about 100 ticks for the downtime, plus the restart), not stopped at the
// kill; the timer
// that fell due in the gap fires at the restart, at its due tick, with
// late > 0 in its event; a timer due later keeps its due tick.
func TestCrashCatchUp(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-fsync", "always", "-tick", "10ms", "-downtime", "catch-up"}
	p := startProc(t, args...)
	c, err := dialWire(p.addr, "before", procToken)
	require.NoError(t, err)
	downtime, gapAfter := time.Second, uint64(30)
	if testing.Short() {
		downtime, gapAfter = 300*time.Millisecond, 10 // well inside the gap, so that it is late
	}
	gap, err := c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 1, After: gapAfter, Repeat: 1, Data: []byte("gap")})
	require.NoError(t, err)
	later, err := c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 7, Tid: 2, After: 100_000})
	require.NoError(t, err)
	v, err := c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	before, wallBefore := v[0], time.Now()
	require.Less(t, before, gap[0], "the gap timer must not be due before the kill")
	p.kill()
	time.Sleep(downtime)
	p = startProc(t, args...)
	c, err = dialWire(p.addr, "after", procToken)
	require.NoError(t, err)
	v, err = c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	after, wall := v[0], time.Since(wallBefore)
	moved, wallTicks := int64(after-before), int64(wall/(10*time.Millisecond))
	t.Logf("tw-time moved %d ticks while %v (%d ticks) passed, %v of them down", moved, wall, wallTicks, downtime)
	assert.GreaterOrEqual(t, moved, int64(downtime/(10*time.Millisecond)), "tw-time caught up with the downtime")
	assert.InDelta(t, wallTicks, moved, 30, "tw-time follows the wall clock across the crash (±300 ms)")

	bound, err := c.uints(protocol.Request{Op: protocol.OpBind, Receiver: 7})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 0, 1}, bound, "the gap timer's event waits in the backlog")
	fires, err := c.waitFires(1)
	require.NoError(t, err)
	f := fires[0]
	assert.Equal(t, [4]uint64{1, gap[0], 1, 1}, [4]uint64{f.Tid, f.Tick, f.Fired, f.Seq})
	assert.True(t, f.Last)
	assert.Equal(t, "gap", string(f.Data))
	assert.Greater(t, f.Late, uint64(0), "it fired late: tw-time jumped past its due tick at the restart")
	assert.LessOrEqual(t, f.Late, after-gap[0], "it fired at the restart, before the ping")
	m, err := c.call(protocol.Request{Op: protocol.OpGet, Receiver: 7, Tid: 2})
	require.NoError(t, err)
	var tm protocol.Timer
	require.NoError(t, protocol.DecodeTimer(m.Result, &tm))
	assert.Equal(t, later[0], tm.Due)
	p.term()
}
