package server

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gogc returns the collector's pace the runtime uses now.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestGCPaceFollowsTimers: with gc_percent at its default the server
// paces the collector by its timers' bytes: Go's default (100) for a
// small state, a room of 64 MiB over the live heap above it, 10% at
// least (100M timers in the heap without data: 10%, so the heap peaks near 1.1x the
// timers, where at 100 it may reach 2x: 67.6–107.5 bytes of RSS a timer
// while adding 100M, against about 64 for the timers); back to 100 while the memory
// limit is lifted for the collector's CPU; and the pace before the server
// set one after it stops. (Not parallel: the pace is the process's.)
func TestGCPaceFollowsTimers(t *testing.T) {
	if gcPaceMode(0) != "derived" {
		t.Skip("GOGC is set in the environment")
	}
	prior := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prior) })
	s := &Server{log: testLogger()}
	var g gcPacer
	s.memLive.Store(1_000_000 * memTimerBytes)
	g.start(s)
	assert.Equal(t, uint64(100), gogc(), "1M timers")
	for _, c := range []struct {
		timers int64
		lifted bool
		want   uint64
	}{
		{100_000_000, false, 10}, {2_000_000, false, 52}, {1_800_000, false, 52}, // within 1/8: not set again
		{3_000_000, false, 34}, {30_000_000, true, 100}, {30_000_000, false, 10}, {1_000_000, false, 100},
	} {
		s.memLive.Store(c.timers * memTimerBytes)
		g.update(s, c.lifted)
		assert.Equal(t, c.want, gogc(), "%d timers, lifted %v", c.timers, c.lifted)
	}
	s.memLive.Store(100_000_000 * memTimerBytes)
	g.update(s, false)
	require.Equal(t, uint64(10), gogc())
	g.stop()
	assert.Equal(t, uint64(100), gogc(), "the pace before the server set one")
}

// TestGCPaceConfigured: gc_percent sets the pace whatever the timers; a
// negative one leaves the runtime's; GOGC in the environment beats it.
func TestGCPaceConfigured(t *testing.T) {
	prior := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prior) })
	if gcPaceMode(0) == "derived" {
		srv := newServer(t, func(c *Config) { c.GCPercent = 30 })
		assert.Equal(t, uint64(30), gogc(), "gc_percent")
		stopNow(t, srv)
		waitUntil(t, "the pace before the server's after it stops", func() bool { return gogc() == 100 })
		debug.SetGCPercent(70)
		srv = newServer(t, func(c *Config) { c.GCPercent = -1 })
		assert.Equal(t, uint64(70), gogc(), "gc_percent negative: left alone")
		stopNow(t, srv)
	}
	assert.Equal(t, "off", gcPaceMode(-1))
	assert.Equal(t, "config", gcPaceMode(25))
	t.Setenv("GOGC", "50")
	assert.Equal(t, "GOGC", gcPaceMode(25))
}
