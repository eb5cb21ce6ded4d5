package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// add -cron adds a calendar timer (until cancelled by default); get, list
// and -json show its schedule, zone and policy; ff by a day fires it once;
// bad combinations are usage errors, bad expressions the server's
// invalid_argument naming the field.
func TestCLICron(t *testing.T) {
	start := uint64(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC).UnixNano() / int64(10*time.Millisecond))
	srv := localServer(t, servertest.WithStartTick(start))
	addr := srv.Addr()
	paris, _ := time.LoadLocation("Europe/Paris")
	next := uint64(time.Date(2026, 3, 29, 4, 0, 0, 0, paris).UnixNano() / int64(10*time.Millisecond))

	code, out, errOut := cli(t, addr, "add", "7", "1", "-cron", "0 4 * * *", "-zone", "Europe/Paris", "-missed", "once")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, fmt.Sprintf("added 7/1: first firing 2026-03-29 04:00:00 CEST (tick %d)\n", next), out)
	code, out, _ = cli(t, addr, "get", "7", "1")
	require.Equal(t, 0, code)
	assert.Equal(t, "7/1  due 2026-03-29 02:00:00 UTC (in 14h)  fired 0/forever  cron \"0 4 * * *\" Europe/Paris  missed once\n", out)
	code, out, _ = cli(t, addr, "get", "-json", "7", "1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"schedule":"0 4 * * *"`)
	assert.Contains(t, out, `"zone":"Europe/Paris"`)
	assert.Contains(t, out, `"missed":1`)

	code, _, errOut = cli(t, addr, "add", "7", "2", "5", "-missed", "skip")
	require.Equal(t, 0, code, errOut)
	code, out, _ = cli(t, addr, "list", "7")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "7/2  due 2026-03-28 12:00:00.05 UTC (in 50ms)")
	assert.Contains(t, out, "fired 0/1  missed skip\n")

	code, _, errOut = cli(t, addr, "ff", "24h")
	require.Equal(t, 0, code, errOut)
	code, out, _ = cli(t, addr, "get", "7", "1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "fired 1/forever")

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "7", "3", "5", "-cron", "@daily"}, 2, "takes no AFTER"},
		{[]string{"add", "7", "3", "-cron", "@daily", "-every", "5"}, 2, "no -at or -every"},
		{[]string{"add", "7", "3"}, 2, "RECEIVER TID -cron EXPR"},
		{[]string{"add", "7", "3", "5", "-zone", "UTC"}, 2, "-zone goes with -cron"},
		{[]string{"add", "7", "3", "5", "-missed", "some"}, 2, `-missed "some"`},
		{[]string{"add", "7", "3", "-cron", "0 25 * * *"}, 1, "field 2 (hour): 25 is above the maximum 23"},
		{[]string{"add", "7", "3", "-cron", "@daily", "-zone", "Mars/Base"}, 1, `zone "Mars/Base"`},
	} {
		code, _, errOut := cli(t, addr, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}
