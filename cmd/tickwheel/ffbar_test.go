package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/servertest"
)

func TestBarLine(t *testing.T) {
	k := clock{tick: 10 * time.Millisecond, zone: time.UTC}
	assert.Equal(t, "["+strings.Repeat(" ", 0)+">"+strings.Repeat(" ", 29)+"]   0%  0s of 10s", barLine(0, 1000, time.Second, k))
	assert.Equal(t, "[=========>                    ]  33%  3.33s of 10s  3.33s/s  ETA 2s", barLine(333, 1000, time.Second, k))
	week := uint64(7 * 24 * 360_000)
	assert.Equal(t, "[==========>                   ]  33%  2d8h of 7d  2d8h/s  ETA 2s", barLine(week/3, week, time.Second, k))
	assert.Equal(t, "[==============================] 100%  8h20m of 8h20m  4h10m/s  ETA 0s", barLine(3_000_000, 3_000_000, 2*time.Second, k))
	assert.Equal(t, "[==============================] 100%  50ms of 0s  50ms/s  ETA 0s", barLine(5, 0, time.Second, k))
}

// ff draws its bar on a terminal once the fast-forward has taken
// ffBarAfter (0 here), polls the server's stats on another connection
// while the request is outstanding, and clears the line when it is over,
// leaving only the result.
func TestFFBar(t *testing.T) {
	old := ffBarAfter
	ffBarAfter = 0
	t.Cleanup(func() { ffBarAfter = old })
	srv := localServer(t, servertest.WithStartTick(1000))
	dial := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, srv.Addr(), client.WithToken(srv.AdminToken()), client.WithReconnect(0, 0))
	}
	c, err := dial(context.Background())
	require.NoError(t, err)
	defer c.Close()
	var out, term syncBuffer
	k := clock{tick: c.TickDuration(), zone: time.UTC}
	e := &env{ctx: context.Background(), c: c, args: []string{"5000"}, stdout: &out, term: &term, dial: dial, clk: k}
	require.NoError(t, ffCmd(e))
	assert.Equal(t, "fast-forwarded 50s to 1970-01-01 00:01:00 UTC: 0 timers fired\n", out.String())
	drawn := term.String()
	assert.True(t, strings.HasPrefix(drawn, "\r[>"), "%q", drawn)
	assert.Contains(t, drawn, " of 50s")
	assert.True(t, strings.HasSuffix(drawn, "\r\x1b[K"), "the line is cleared: %q", drawn)

	// The bar's figures are the server's: with no fast-forward running
	// the wheel is not behind (lag 0), so all of the 100 ticks are done.
	term = syncBuffer{}
	bar := startFFBar(&term, dial, 100, k)
	for !strings.Contains(term.String(), "100%  1s of 1s") {
		time.Sleep(time.Millisecond)
	}
	bar.finish()

	// Not on a terminal: no bar.
	term = syncBuffer{}
	e.term = nil
	require.NoError(t, ffCmd(e))
	assert.Empty(t, term.String())
	assert.Nil(t, terminal(&out))
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	assert.Nil(t, terminal(f), "a file is not a terminal")
}
