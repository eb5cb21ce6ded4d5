package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                              "0s",
		10 * time.Millisecond:          "10ms",
		3520 * time.Millisecond:        "3.52s",
		12*time.Minute + 5*time.Second: "12m5s",
		3*time.Hour + 12*time.Minute:   "3h12m",
		3 * time.Hour:                  "3h",
		9*24*time.Hour + 4*time.Hour:   "9d4h",
		7 * 24 * time.Hour:             "7d",
		23*time.Hour + 59*time.Minute + 59*time.Second: "1d",
	} {
		assert.Equal(t, want, humanDuration(d), "%v", d)
	}
	k := clock{tick: 10 * time.Millisecond, zone: time.UTC}
	assert.Equal(t, "3.52s", k.dur(352))
	assert.Equal(t, "2135039823346d", k.dur(1<<64-1), "past time.Duration's range")
	assert.Equal(t, "tick 18446744073709551615", k.at(1<<64-1), "past year 9999")
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	at := uint64(time.Date(2026, 11, 27, 4, 0, 0, 0, paris).UnixMilli() / 10)
	assert.Equal(t, "2026-11-27 04:00:00 CET", clock{tick: 10 * time.Millisecond, zone: paris}.at(at))
	assert.Equal(t, "2026-11-27 03:00:00.01 UTC", k.at(at+1))
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"1.5s":   1500 * time.Millisecond,
		"90m":    90 * time.Minute,
		"7d":     7 * 24 * time.Hour,
		"1w":     7 * 24 * time.Hour,
		"1d12h":  36 * time.Hour,
		"1.5d":   36 * time.Hour,
		"1w1d1s": 8*24*time.Hour + time.Second,
		"-7d":    -7 * 24 * time.Hour,
	} {
		d, err := parseDuration(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	for _, s := range []string{"", "d", "7", "7x", "7dd", "--7d", "1e9w", "7d-1h"} {
		_, err := parseDuration(s)
		assert.Error(t, err, s)
	}
}

// TestFFDays: ff takes days and weeks as well as Go durations, and a bare
// number is still a count of ticks.
func TestFFDays(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	code, out, errOut := cli(t, addr, "ff", "7d")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "fast-forwarded 7d to 1970-01-08 00:00:10 UTC: 0 timers fired\n", out)
	code, out, errOut = cli(t, addr, "ff", "-json", "1w")
	require.Equal(t, 0, code, errOut)
	assert.JSONEq(t, `{"now": 120961000, "fired": 0}`, out, "a week of 10-ms ticks")
	code, out, errOut = cli(t, addr, "ff", "100")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "fast-forwarded 1s to 1970-01-15 00:00:11 UTC: 0 timers fired\n", out)
	code, _, errOut = cli(t, addr, "ff", "-7d")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "must be a positive tick count or duration, got -7d")
	code, _, errOut = cli(t, addr, "ff", "7days")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "a duration such as 1.5s, 90m, 7d or 1w")
}

// TestAddAtForms: -at takes a tick number (digits only), an RFC 3339 time
// (the first tick at or after it) or a duration from now (as AFTER).
func TestAddAtForms(t *testing.T) {
	start := uint64(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).UnixMilli() / 10)
	srv := localServer(t, servertest.WithStartTick(start))
	addr := srv.Addr()
	code, out, errOut := cli(t, addr, "add", "1", "1", "-at", "2026-11-27T04:00:00+01:00")
	require.Equal(t, 0, code, errOut)
	want := uint64(time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC).UnixMilli() / 10)
	assert.Equal(t, "added 1/1: first firing 2026-11-27 03:00:00 UTC (tick "+uitoa(want)+")\n", out)

	code, out, errOut = cli(t, addr, "add", "-json", "1", "2", "-at", "2026-11-27T03:00:00.001Z")
	require.Equal(t, 0, code, errOut)
	var v struct{ Due uint64 }
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, want+1, v.Due, "never before the time asked for")

	code, out, errOut = cli(t, addr, "add", "1", "3", "-at", "1d")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "added 1/3: first firing 2026-11-27 12:00:00 UTC (tick "+uitoa(start+8_640_000)+")\n", out)

	code, out, errOut = cli(t, addr, "get", "1", "3", "-zone", "Europe/Paris")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "1/3  due 2026-11-27 13:00:00 CET (in 1d)  fired 0/1\n", out)

	for _, bad := range []string{"2026-11-27T04:00:00", "tomorrow", "-1h", "1969-01-01T00:00:00Z"} {
		code, _, errOut = cli(t, addr, "add", "1", "4", "-at", bad)
		assert.Equal(t, 2, code, bad)
		assert.True(t, strings.Contains(errOut, "-at "), "%s: %s", bad, errOut)
	}
	code, _, errOut = cli(t, addr, "get", "1", "3", "-zone", "Mars/Base")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `-zone "Mars/Base": want an IANA time zone`)
}

// TestAddrFromEnv: $TICKWHEEL_ADDR is the default address; -addr beats it.
func TestAddrFromEnv(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	t.Setenv(envAddr, srv.Addr())
	var out, errOut syncBuffer
	code := run([]string{"ping"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	assert.Equal(t, "pong: tw-time is 1970-01-01 00:00:10 UTC (tick 1000)\n", out.String())

	t.Setenv(envAddr, "127.0.0.1:1") // nothing listens there
	code, _, errText := cli(t, srv.Addr(), "ping")
	assert.Equal(t, 0, code, errText)
	var out2, errOut2 syncBuffer
	code = run([]string{"ping", "-timeout", "2s"}, &out2, &errOut2)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut2.String(), "127.0.0.1:1")
}

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }
