package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestStalledIdleCloseEndsOnFrame: a plain-mode session that stopped
// reading, with its kernel buffer full and max_outbound bytes waiting in the
// server, is closed by the idle timeout. When the client reads again it
// gets complete frames, its events in seq order, then the timeout error,
// then EOF: never a frame cut in the middle, never a close without the
// reason. (Before, the connection was closed at once: the stream stopped
// where the kernel stopped taking bytes, inside a frame, and the error at
// the end of the server's buffer was never sent.)
func TestStalledIdleCloseEndsOnFrame(t *testing.T) {
	srv, admin, slow := slowSetup(t, func(c *Config) {
		c.Timeouts = Timeouts{Idle: 2 * time.Second, Handshake: -1, Frame: 20 * time.Second}
	})
	_ = srv
	advanceUntil(t, admin, "events held back", func(st protocol.Stats) bool { return st.BacklogEvents > 0 })
	admin.waitSessions(1) // the slow session is closed by the idle timeout (admin keeps asking)

	ms := slow.readUntilClosed()
	require.NotEmpty(t, ms)
	var lastSeq uint64
	for i, m := range ms[:len(ms)-1] {
		require.Equal(t, protocol.KindFire, m.Kind, "message %d of %d", i, len(ms))
		require.Greater(t, m.Fire.Seq, lastSeq, "events come in seq order")
		lastSeq = m.Fire.Seq
	}
	last := ms[len(ms)-1]
	require.Equal(t, protocol.KindError, last.Kind, "the stream ends with the reason (after %d events, last seq %d)", len(ms)-1, lastSeq)
	require.Equal(t, protocol.CodeTimeout, last.Code)
	require.Contains(t, last.Text, "timeouts.idle")
	t.Logf("%d complete events, then the timeout error", len(ms)-1)
}

// TestLingerEnds: a closed session whose client does not read again keeps
// its connection (and its file descriptor) for at most timeouts.frame,
// then the server closes it. (Its stream may then end inside a frame: the
// bytes in the kernel's send buffer are beyond the server's reach.)
func TestLingerEnds(t *testing.T) {
	srv, admin, slow := slowSetup(t, func(c *Config) {
		c.Timeouts = Timeouts{Idle: 2 * time.Second, Handshake: -1, Frame: 3 * time.Second}
	})
	conns := func() int64 {
		m, err := srv.ReadMetrics(context.Background(), 0)
		require.NoError(t, err)
		return m.Connections
	}
	advanceUntil(t, admin, "events held back", func(st protocol.Stats) bool { return st.BacklogEvents > 0 })
	admin.waitSessions(1)
	require.Equal(t, int64(2), conns(), "the closed session's connection lingers for its client to read")
	waitUntil(t, "the lingering connection's close", func() bool { return conns() == 1 })
	require.True(t, slow.closed())
}
