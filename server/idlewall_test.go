package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestIdleServerRecordsNothing: a durable server (fsync everysec, tw-time
// running at a 10 ms tick) whose only timer is an hour away writes no
// record and fsyncs nothing once idleAfter has passed since its last
// record, over 2.5 s; before, it recorded the wall-clock pairing every
// second, a record, an fsync and a TAIL write each, and its loop woke each
// second for it (40% of an idle server's CPU). A restart 1 s after the
// stop still catches up by the wall-clock time since, from the older
// pairing: tw-time moves as the wall clock did (±300 ms).
func TestIdleServerRecordsNothing(t *testing.T) {
	dir := t.TempDir()
	conf := func(c *Config) {
		durable(dir, "everysec")(c)
		c.Frozen, c.Tick, c.Downtime = false, 10*time.Millisecond, DowntimeCatchUp
	}
	srv := newServer(t, conf)
	c := helloClient(t, srv, "c")
	c.add(protocol.Request{Receiver: 1, Tid: 1, After: 360_000})
	c.ping()
	time.Sleep(idleAfter + 500*time.Millisecond)
	before := logFigures(t, srv)
	time.Sleep(2500 * time.Millisecond)
	after := logFigures(t, srv)
	assert.Zero(t, after.LastIndex-before.LastIndex, "records written while idle")
	assert.Zero(t, after.Syncs-before.Syncs, "fsyncs while idle")

	tick, wall := c.ping(), time.Now()
	stopNow(t, srv)
	time.Sleep(time.Second)
	srv = startServer(t, conf)
	c = helloClient(t, srv, "c")
	moved, passed := int64(c.ping()-tick), int64(time.Since(wall)/(10*time.Millisecond))
	t.Logf("tw-time moved %d ticks while %d passed", moved, passed)
	assert.InDelta(t, passed, moved, 30, "tw-time follows the wall clock across the stop")
}

// With downtime pause an idle server still records the pairing each
// second: tw-time resumes from the last one after a crash, so a pairing a
// minute old would make the minute before the crash count as downtime.
// After 6 s of idleness and a kill -9, tw-time resumes within about a
// second of where it was.
func TestIdlePausedServerResumesWhereItWas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 6 s idle, a process killed")
	}
	args := []string{"-data-dir", t.TempDir(), "-fsync", "everysec", "-tick", "10ms", "-downtime", "pause"}
	p := startProc(t, args...)
	c, err := dialWire(p.addr, "before", procToken)
	require.NoError(t, err)
	_, err = c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 1, After: 360_000})
	require.NoError(t, err)
	time.Sleep(idleAfter + 3*time.Second)
	v, err := c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	p.kill()
	p = startProc(t, args...)
	c, err = dialWire(p.addr, "after", procToken)
	require.NoError(t, err)
	w, err := c.uints(protocol.Request{Op: protocol.OpPing})
	require.NoError(t, err)
	t.Logf("tw-time at the kill %d, resumed at %d", v[0], w[0])
	assert.InDelta(t, float64(v[0]), float64(w[0]), 150, "tw-time resumes from within about a second of the kill")
}
