package client

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
)

// TestSlowConsumerRecovers walks the documented backpressure path end to
// end: a consumer that does not read fills the event buffer, the Client
// stops reading its socket, the server passes max_outbound and closes the
// connection, the next events wait in the receiver's backlog; once the
// consumer reads again the Client sees the loss, reconnects, re-binds, and
// the backlog arrives. Sequence numbers only increase; events the server
// had handed to the closed connection may be missing (a gap).
func TestSlowConsumerRecovers(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.Limits.MaxOutbound = 128 << 10 })
	slow := dial(t, srv.Addr(), WithEventBuffer(1), WithReconnect(10*time.Millisecond, 10*time.Millisecond))
	admin := dial(t, srv.Addr())
	ctx := tctx(t)
	_, _, err := slow.Bind(ctx, 1, false)
	require.NoError(t, err)
	session1 := slow.Session()

	const n = 2000
	data := bytes.Repeat([]byte{'x'}, 4000) // 2000 events of 4 KB: far over max_outbound
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Go(func() {
			for i := range n / 10 {
				_, err := admin.Add(ctx, 1, uint64(g*n/10+i), 1, &AddOptions{Repeat: 1, Data: data})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	_, fired, err := admin.FastForward(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, uint64(n), fired)
	s, err := admin.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), s.Sessions, "the server dropped the slow session")
	require.NotZero(t, s.BacklogEvents)

	var last, got uint64
	for last < n {
		ev := nextEvent(t, slow.Events())
		require.Greater(t, ev.Seq, last)
		last = ev.Seq
		got++
	}
	assert.NotEqual(t, session1, slow.Session(), "reconnected")
	t.Logf("received %d of %d events; %d lost with the closed connection", got, n, n-got)
}
