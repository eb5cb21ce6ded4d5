package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

// TestFFStoppedByFreeze: `tickwheel freeze` from another shell stops a
// running `tickwheel ff` where it is, and ff says where it stopped (it
// used to run for ever toward 2^64 over a timer firing every tick).
func TestFFStoppedByFreeze(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	code, _, errOut := cli(t, addr, "add", "1", "1", "1", "-every", "1", "-repeat", "forever")
	require.Equal(t, 0, code, errOut)
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, err := cli(t, addr, "ff", "1000000000000")
		done <- result{code, out, err}
	}()
	watcher, err := client.Dial(context.Background(), addr, client.WithToken(srv.AdminToken()))
	require.NoError(t, err)
	defer watcher.Close()
	require.Eventually(t, func() bool { // the fast-forward is firing
		st, err := watcher.Stats(context.Background())
		return err == nil && st.FiredTotal > 1000
	}, 10*time.Second, time.Millisecond)
	code, out, errOut := cli(t, addr, "freeze")
	require.Equal(t, 0, code, errOut)
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("freeze did not stop the fast-forward")
	}
	require.Equal(t, 0, r.code, r.err)
	m := regexp.MustCompile(`tick (\d+)`).FindStringSubmatch(out) // "frozen: tw-time is <time> (tick N)"
	require.NotNil(t, m, out)
	at := m[1]
	assert.Contains(t, r.out, "(tick "+at+"), ")
	assert.Regexp(t, `short of \d{4}-\d\d-\d\d `, r.out) // the target, as a time
	code, out, _ = cli(t, addr, "ping")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "tick "+at)
}
