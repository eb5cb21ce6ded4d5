package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// TestListPages: list prints every timer in tid order across pages of the
// server's max_list_page, and one JSON object per timer with -json.
func TestListPages(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000), servertest.WithConfig(func(c *servertest.Config) { c.Limits.MaxListPage = 2 }))
	addr := srv.Addr()
	var want []string
	for _, tid := range []int{50, 3, 40, 1, 20} {
		code, _, errOut := cli(t, addr, "add", "7", fmt.Sprint(tid), "5")
		require.Equal(t, 0, code, errOut)
	}
	for _, tid := range []int{1, 3, 20, 40, 50} {
		want = append(want, fmt.Sprintf("7/%d  due 1970-01-01 00:00:10.05 UTC (in 50ms)  fired 0/1", tid))
	}
	code, out, errOut := cli(t, addr, "list", "7")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, strings.Join(want, "\n")+"\n", out)

	code, out, _ = cli(t, addr, "list", "-json", "7")
	require.Equal(t, 0, code)
	assert.Equal(t, 5, strings.Count(out, "\n"))
	assert.True(t, strings.HasPrefix(out, `{"data":"","due":1005,"fired":0,"paused":false,"receiver":7,"remaining":5,"repeat":1,"tid":1}`), out)
}

// TestTimerInterval: get and list show "every" only for a repeating timer
// on an interval; a one-shot (after AFTER or -at) has none, and a cron
// timer shows its schedule instead.
func TestTimerInterval(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	for _, args := range [][]string{
		{"add", "7", "1", "-at", "99999999999999"},
		{"add", "7", "2", "5", "-every", "3", "-repeat", "forever"},
		{"add", "7", "3", "-cron", "@daily"},
	} {
		code, _, errOut := cli(t, addr, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
	}
	code, out, errOut := cli(t, addr, "get", "7", "1")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "7/1  due tick 99999999999999 (in 11574074d)  fired 0/1\n", out)
	code, out, _ = cli(t, addr, "get", "-json", "7", "1")
	require.Equal(t, 0, code)
	assert.NotContains(t, out, `"every"`)

	code, out, errOut = cli(t, addr, "list", "7")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(out, "\n")
	require.Len(t, lines, 4, out)
	assert.Equal(t, "7/2  due 1970-01-01 00:00:10.05 UTC (in 50ms)  every 30ms  fired 0/forever", lines[1])
	assert.NotContains(t, lines[2], "every")
	assert.Contains(t, lines[2], `cron "@daily" UTC`)
	code, out, _ = cli(t, addr, "list", "-json", "7")
	require.Equal(t, 0, code)
	lines = strings.Split(out, "\n")
	assert.Contains(t, lines[1], `"every":3`)
	assert.NotContains(t, lines[2], `"every"`)
}
