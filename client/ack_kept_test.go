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
	// The redelivery of 1..n should be dropped as duplicates.
	dups := 0
	deadline := time.After(2 * time.Second)
loop:
	for {
		select {
		case ev := <-c.Events():
			if ev.Kind == Fire {
				dups++
			}
		case <-deadline:
			break loop
		}
	}
	assert.Zero(t, dups, "events the user already has, delivered again by the same Client")
	assert.Equal(t, uint64(n), c.Redelivered())
}
