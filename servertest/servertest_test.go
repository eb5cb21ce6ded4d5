package servertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestPoison is the game team's test from the servertest doc: poison for
// 10 s, ticking every second, checked without sleeping.
func TestPoison(t *testing.T) {
	srv := servertest.RunT(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	const player, poison = 42, 7
	_, _, err = c.Bind(ctx, player, false)
	require.NoError(t, err)
	start := srv.Now()
	_, err = c.AddAfter(ctx, player, poison, time.Second, &client.AddOptions{Repeat: 10, Data: []byte("poison")})
	require.NoError(t, err)

	began := time.Now()
	assert.Equal(t, 9, srv.Advance(9*time.Second), "nine ticks of poison after 9 s")
	assert.Equal(t, 1, srv.Advance(1500*time.Millisecond), "the tenth, rounding 1.5 s up to whole ticks")
	assert.Less(t, time.Since(began), 5*time.Second, "no sleeping")
	for i := uint64(1); i <= 10; i++ {
		ev := <-c.Events()
		assert.Equal(t, i, ev.Fired)
		assert.Equal(t, start+i*100, ev.Tick, "every 100 ticks of 10 ms")
		assert.Equal(t, i == 10, ev.Last)
	}
	assert.Equal(t, start+1050, srv.Now())
	assert.Equal(t, 0, srv.AdvanceTicks(1000), "the poison is over")
}

func TestRunTOptions(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(77), servertest.WithConfig(func(c *servertest.Config) { c.Tick = time.Second }))
	assert.Equal(t, uint64(77), srv.Now())
	assert.Equal(t, time.Second, srv.Tick())
	assert.Equal(t, 0, srv.Advance(0))
}
