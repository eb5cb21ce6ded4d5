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
// stops reading its socket, the server holds what passes max_outbound in the
// receiver's backlog instead of writing it; once the consumer reads again
// every event arrives, in order, on the same connection.
func TestSlowConsumerRecovers(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.Limits.MaxOutbound = 128 << 10 })
	slow := dial(t, srv.Addr(), WithEventBuffer(1), WithReconnect(10*time.Millisecond, 10*time.Millisecond))
	admin := dial(t, srv.Addr())
	ctx := tctx(t)
	_, err := slow.Bind(ctx, 1, nil)
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
	require.Equal(t, uint64(2), s.Sessions, "the slow session stays connected")
	require.NotZero(t, s.BacklogEvents, "events wait in the backlog, not in the connection")

	var last uint64
	for last < n {
		ev := nextEvent(t, slow.Events())
		require.Equal(t, last+1, ev.Seq, "every event, in order")
		last = ev.Seq
	}
	assert.Equal(t, session1, slow.Session(), "no reconnection was needed")
	assert.Zero(t, slow.Dropped())
}
