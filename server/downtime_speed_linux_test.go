//go:build linux

package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestResumeTickCountsSpeed: after a downtime, catch-up moves tw-time on
// by the wall-clock time that passed times the speed an admin set; a
// server an admin froze does not move (docs/PROTOCOL.md, Durability).
func TestResumeTickCountsSpeed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		speed  float64
		frozen bool
		want   uint64
	}{
		{"speed 1", 1, false, 1000 + 30_000},
		{"speed 2", 2, false, 1000 + 60_000},
		{"speed 0.5", 0.5, false, 1000 + 15_000},
		{"frozen", 2, true, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := unstartedDurable(t, t.TempDir())
			srv.cfg.Downtime = DowntimeCatchUp
			srv.core.SetClock(tc.speed, tc.frozen)
			srv.core.SetWall(uint64(srv.origin.UnixNano()), 1000)
			down := srv.origin.Add(30_000 * srv.cfg.Tick) // 5 minutes of 10 ms ticks
			assert.Equal(t, tc.want, srv.resumeTick(down))
		})
	}
}
