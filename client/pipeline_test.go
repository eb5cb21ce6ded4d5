package client

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPipelining: 1000 concurrent adds from 20 goroutines on one connection
// all succeed, and their 1000 events arrive in order per receiver.
func TestPipelining(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	const receivers, goroutines, perG = 4, 20, 50
	for r := uint64(1); r <= receivers; r++ {
		_, err := c.Bind(ctx, r, nil)
		require.NoError(t, err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, goroutines*perG)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				n := uint64(g*perG + i)
				due, err := c.Add(ctx, 1+n%receivers, n, 1+n%10, &AddOptions{Repeat: 1})
				if err == nil && due != start+1+n%10 {
					t.Errorf("add %d: due %d", n, due)
				}
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Consume while the fast-forward fires everything.
	got := make(chan []Event)
	go func() {
		var evs []Event
		for len(evs) < goroutines*perG {
			evs = append(evs, <-c.Events())
		}
		got <- evs
	}()
	_, fired, err := c.FastForward(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(goroutines*perG), fired)
	evs := <-got

	lastSeq := map[uint64]uint64{}
	lastTick := uint64(0)
	for _, ev := range evs {
		require.Equal(t, Fire, ev.Kind)
		require.Equal(t, lastSeq[ev.Receiver]+1, ev.Seq, "receiver %d", ev.Receiver)
		lastSeq[ev.Receiver] = ev.Seq
		require.GreaterOrEqual(t, ev.Tick, lastTick)
		lastTick = ev.Tick
		require.Equal(t, start+1+ev.Tid%10, ev.Tick)
		require.True(t, ev.Last)
	}
	for r := uint64(1); r <= receivers; r++ {
		assert.Equal(t, uint64(goroutines*perG/receivers), lastSeq[r])
	}
	noEvent(t, c.Events())
}

// TestSlowConsumerBackpressure: with a tiny event buffer and nobody
// reading, the Client stops reading its socket, so a call behind the events
// waits; once the consumer catches up the call completes.
func TestSlowConsumerBackpressure(t *testing.T) {
	srv := startServer(t, nil)
	c := dial(t, srv.Addr(), WithEventBuffer(2))
	ctx := tctx(t)
	_, err := c.Bind(ctx, 1, nil)
	require.NoError(t, err)
	for tid := range uint64(10) {
		_, err := c.Add(ctx, 1, tid, 1, nil)
		require.NoError(t, err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := c.FastForward(ctx, 1) // its reply follows the 10 events
		done <- err
	}()
	eventually(t, "buffer full", func() bool { return len(c.Events()) == 2 })
	select {
	case err := <-done:
		t.Fatalf("fast-forward returned (%v) while its events were not consumed", err)
	default:
	}
	for i := range uint64(10) {
		ev := nextEvent(t, c.Events())
		assert.Equal(t, i+1, ev.Seq)
	}
	require.NoError(t, <-done)
}
