//go:build linux

package server

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// The log records an add with after_ns (or a schedule) as the request
// and the instant it counted from: a replay computes its due tick again,
// with the Core's tick length. After a crash (records past the last
// snapshot), a restart with the same tick gives every timer the due tick
// and interval acknowledged before; with another tick the start is refused,
// naming both ticks, instead of moving the timers (a red-team pass found
// the replay then gave other due ticks, or failed on a reply of another
// length).
func TestRestartKeepsTheTick(t *testing.T) {
	for _, tc := range []struct {
		name     string
		afterNs  bool
		schedule string
	}{{"after-ticks", false, ""}, {"after_ns", true, ""}, {"schedule-every", false, "@every 90ms"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mut := func(tick time.Duration) func(*Config) {
				return func(c *Config) {
					durable(dir, "always")(c)
					c.Frozen, c.Tick, c.StartTick = false, tick, 65530 // replies near msgpack's uint16/uint32 edge
				}
			}
			srv, err := newUnstarted(t, slog.New(slog.DiscardHandler), mut(10*time.Millisecond))
			require.NoError(t, err)
			sess := srv.core.Open()
			srv.core.Apply(sess, protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "rt", Token: testAdminToken})[4:])
			srv.endTurn()
			type rec struct{ due, every uint64 }
			want := map[uint64]rec{}
			for i := range uint64(10) {
				time.Sleep(time.Millisecond)
				req := protocol.Request{Op: protocol.OpAdd, ID: i + 1, Receiver: 1, Tid: i, After: 1 + i, Repeat: 3}
				if tc.schedule != "" {
					req.After, req.Repeat, req.Schedule = 0, 0, tc.schedule
				}
				if tc.afterNs {
					req.AfterNs = uint64(time.Duration(1+i) * 10 * time.Millisecond)
				}
				srv.core.Apply(sess, protocol.AppendRequest(nil, &req)[4:])
				srv.endTurn()
				tm, err := srv.core.Wheel().Get(wheel.Key{Receiver: 1, Tid: i})
				require.NoError(t, err)
				want[i] = rec{tm.Due, tm.Every}
			}
			require.NoError(t, srv.stopLogCrash()) // a crash: the log without the last snapshot

			_, err = newUnstarted(t, slog.New(slog.DiscardHandler), mut(time.Millisecond))
			require.ErrorIs(t, err, session.ErrTickChanged, "a restart with tick 1ms")
			require.ErrorContains(t, err, "tick of 10ms and this server's is 1ms")

			again, err := newUnstarted(t, slog.New(slog.DiscardHandler), mut(10*time.Millisecond))
			require.NoError(t, err, "a restart with the state's tick")
			defer again.closeLog()
			for i, w := range want {
				tm, err := again.core.Wheel().Get(wheel.Key{Receiver: 1, Tid: i})
				require.NoError(t, err)
				require.Equal(t, w, rec{tm.Due, tm.Every}, "tid %d: due and every acknowledged before the crash", i)
			}
		})
	}
}
