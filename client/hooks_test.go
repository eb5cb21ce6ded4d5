package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// TestConnectionHooks: the hooks report each loss, with its cause, and
// each reconnection once the re-binds were answered; not Dial's first
// connection.
func TestConnectionHooks(t *testing.T) {
	srv := servertest.RunT(t)
	events := make(chan string, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, srv.Addr(), WithReconnect(time.Millisecond, time.Millisecond),
		WithConnectionHooks(func(cause error) {
			assert.Error(t, cause)
			events <- "lost"
		}, func() { events <- "reconnected" }))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 4, nil)
	require.NoError(t, err)
	assert.Empty(t, events, "no hook for the first connection")
	for range 2 {
		require.Positive(t, srv.DropConnections())
		for _, want := range []string{"lost", "reconnected"} {
			select {
			case got := <-events:
				require.Equal(t, want, got)
			case <-ctx.Done():
				t.Fatalf("no %q", want)
			}
		}
		_, err := c.Ping(ctx)
		require.NoError(t, err)
	}
	// The receiver was bound again before "reconnected": a takeover of
	// it reaches this Client.
	other, err := Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Bind(ctx, 4, nil)
	require.NoError(t, err)
	select {
	case ev := <-c.Events():
		assert.Equal(t, Takeover, ev.Kind)
	case <-ctx.Done():
		t.Fatal("no takeover: the receiver was not bound again")
	}
}
