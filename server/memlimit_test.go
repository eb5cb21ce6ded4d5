package server

import (
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel"
)

// TestMemoryLimitSet: the server sets the process's soft memory limit
// from memory_limit, or derives it from the budgets (it set none before,
// and RSS reached 2.2x the budgets); a GOMEMLIMIT in the environment is
// left alone. (Not parallel: the limit is the process's.)
func TestMemoryLimitSet(t *testing.T) {
	prior := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prior) })

	startServer(t, func(c *Config) { c.MemoryLimit = 3 << 30 })
	got, mapped := debug.SetMemoryLimit(-1), wheel.MappedBytes() // another test's wheel may still be mapped
	assert.Equal(t, configMemLimit(3<<30, mapped), got, "memory_limit")

	startServer(t, func(c *Config) {
		c.Limits.MaxBacklogBytesTotal, c.Limits.MaxOutboxBytesTotal, c.Limits.MaxOutboundTotal = 100<<20, 20<<20, 200<<20
	})
	got = debug.SetMemoryLimit(-1)
	want := derivedMemLimit(320<<20, 0, 0, 64<<10)
	assert.GreaterOrEqual(t, got, want, "derived: 5/4 of the budgets and the base")
	assert.Less(t, got, want+want/16, "derived: 5/4 of the budgets and the base")

	debug.SetMemoryLimit(5 << 30)
	t.Setenv("GOMEMLIMIT", strconv.Itoa(5<<30))
	startServer(t, func(c *Config) { c.MemoryLimit = 1 << 30 })
	assert.Equal(t, int64(5<<30), debug.SetMemoryLimit(-1), "GOMEMLIMIT is the operator's")
}

// TestConfigMemLimitLeavesMapped: a configured memory_limit is the
// process's; the runtime's limit is what the wheels' mapped memory leaves
// of it, and never less than a sixteenth of it.
func TestConfigMemLimitLeavesMapped(t *testing.T) {
	assert.Equal(t, int64(3<<30), configMemLimit(3<<30, 0))
	assert.Equal(t, int64(2<<30), configMemLimit(3<<30, 1<<30))
	assert.Equal(t, int64(3<<30)/16, configMemLimit(3<<30, 3<<30))
	assert.Equal(t, int64(3<<30)/16, configMemLimit(3<<30, 5<<30))
}

// TestMemLimitMode: GOMEMLIMIT beats memory_limit, which is off when
// negative, and derived when 0.
func TestMemLimitMode(t *testing.T) {
	assert.Equal(t, "derived", memLimitMode(0))
	assert.Equal(t, "off", memLimitMode(-1))
	assert.Equal(t, "config", memLimitMode(1<<30))
	t.Setenv("GOMEMLIMIT", "1GiB")
	assert.Equal(t, "GOMEMLIMIT", memLimitMode(0))
}

// TestMemoryLimitLiftedWhenGCSpins: a limit under the live heap makes the
// collector run back to back (the event loop pays with it: 5x the CPU
// and events 10 s late in a run); the server lifts it once the collector
// takes more than memGCShareMax of the CPU over a second.
func TestMemoryLimitLiftedWhenGCSpins(t *testing.T) {
	if testing.Short() {
		t.Skip("spins the collector for a few seconds")
	}
	prior := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prior) })
	startServer(t, func(c *Config) { c.MemoryLimit = 8 << 20 })
	require.Equal(t, configMemLimit(8<<20, wheel.MappedBytes()), debug.SetMemoryLimit(-1))
	live := make([][]byte, 0, 64)
	for range 64 {
		live = append(live, make([]byte, 1<<20)) // 64 MiB live: over the limit
	}
	var sink []byte
	deadline := time.Now().Add(20 * time.Second)
	for debug.SetMemoryLimit(-1) != math.MaxInt64 && time.Now().Before(deadline) {
		for range 1000 {
			sink = make([]byte, 4096) // garbage: a collection every few allocations under the limit
		}
	}
	runtime.KeepAlive(live)
	_ = sink
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "the limit was not lifted")
}
