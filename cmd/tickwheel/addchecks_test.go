package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tickwheel/tickwheel/servertest"
)

// An empty -cron (a script's empty $CRON) is no schedule: AFTER with -at,
// and -every on a one-shot, are refused as without it.
func TestAddEmptyCronKeepsTimingChecks(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(1000))
	tok := srv.AdminToken()
	code, out, errOut := cli(t, srv.Addr(), "add", "-token", tok, "2", "1", "7", "-at", "2000", "-cron", "")
	assert.Equal(t, 2, code, "AFTER 7 with -at 2000 and -cron \"\": %s%s", out, errOut)
	code, out, errOut = cli(t, srv.Addr(), "add", "-token", tok, "2", "2", "7", "-every", "3", "-cron", "")
	assert.Equal(t, 2, code, "-every on a one-shot with -cron \"\": %s%s", out, errOut)
}

// AFTER 0 (or 0s), -at 0, and -at a tick or a time already passed fire
// at the next tick instead of being refused (the CLI refused -at 0, the
// server AFTER 0 and a past -at, before zero delays); -at's firing is late
// by how far in the past it was.
func TestAddZeroAndPastFireNext(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	for i, args := range [][]string{
		{"0"}, {"0s"}, {"-at", "0"}, {"-at", "990"}, {"-at", "1970-01-01T00:00:05Z"}, {"-at", "0s"},
	} {
		code, out, errOut := cli(t, addr, append([]string{"add", "1", strconv.Itoa(10 + i)}, args...)...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		assert.Equal(t, "added 1/"+strconv.Itoa(10+i)+": first firing 1970-01-01 00:00:10.01 UTC (tick 1001)\n", out, args)
	}
	code, _, errOut := cli(t, addr, "ff", "2")
	require.Equal(t, 0, code, errOut)
	code, out, errOut := cli(t, addr, "watch", "-n", "6", "-json", "1")
	require.Equal(t, 0, code, errOut)
	lates := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		if tid, ok := ev["tid"]; ok { // (the first line is the bind's)
			lates[fmt.Sprint(tid)] = fmt.Sprint(ev["late"])
		}
	}
	assert.Equal(t, map[string]string{"10": "0", "11": "0", "12": "0", "13": "10", "14": "500", "15": "0"}, lates)
}

// -every 0 (or -0s) is refused, not taken as "the default interval".
func TestAddEveryZeroRefused(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(1000))
	for _, v := range []string{"0", "0s", "-0s"} {
		code, out, errOut := cli(t, srv.Addr(), "add", "-token", srv.AdminToken(), "2", "4", "7", "-repeat", "3", "-every", v)
		assert.Equal(t, 2, code, "-every %s: %s%s", v, out, errOut)
		assert.Contains(t, errOut, "positive interval", v)
	}
}
