package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// watch given the same receiver twice binds it once, so a
// takeover leaves it with nothing to watch: it must exit 1, as with "watch 9".
func TestWatchDuplicateReceiverTakeover(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	var wout, werr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"watch", "-addr", addr, "9", "9"}, &wout, &werr) }()
	require.Eventually(t, func() bool { return strings.Count(wout.String(), "watching receiver 9") == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Bind(ctx, 9, nil)
	require.NoError(t, err)
	select {
	case code := <-done:
		require.Equal(t, 1, code)
	case <-time.After(3 * time.Second):
		t.Fatalf("watch 9 9 still running after its only receiver was taken over; stdout:\n%s", wout.String())
	}
}
