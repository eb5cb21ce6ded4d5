package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestDuplicatesPastMaxKept: within one Client every event reaches the
// user once, even when more are unacknowledged than the Client keeps
// fingerprints of (maxKept; the server's max_outbox is 100,000 by
// default): a redelivered seq older than the kept ones is a duplicate by
// its seq alone.
func TestDuplicatesPastMaxKept(t *testing.T) {
	const n = maxKept + 10
	f := startAckFake(t, func(int) ([]uint64, []protocol.Fire) {
		return []uint64{n, 0, 1}, fires(1, n) // the same outbox each time
	})
	c := dial(t, f.addr(), WithReconnect(time.Millisecond, time.Millisecond))
	_, err := c.Bind(tctx(t), 5, &BindOptions{Ack: AckManual})
	require.NoError(t, err)
	for i := uint64(1); i <= n; i++ {
		ev := nextEvent(t, c.Events())
		require.Equal(t, i, ev.Seq)
	}
	c.dropConn()
	// The redelivery of 1..n should be dropped as duplicates: collect
	// every event until the Client has counted all n redelivered (it
	// reads them in order, so none is left behind then), however long a
	// loaded -race run takes to get there, and a moment more for an
	// event already on its way to the channel.
	dups := 0
	deadline := time.After(60 * time.Second)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	var grace <-chan time.Time
loop:
	for {
		select {
		case ev := <-c.Events():
			if ev.Kind == Fire {
				dups++
			}
		case <-poll.C:
			if grace == nil && c.Redelivered() >= n {
				grace = time.After(100 * time.Millisecond)
			}
		case <-grace:
			break loop
		case <-deadline:
			break loop
		}
	}
	assert.Zero(t, dups, "events the user already has, delivered again by the same Client")
	assert.Equal(t, uint64(n), c.Redelivered())
}
