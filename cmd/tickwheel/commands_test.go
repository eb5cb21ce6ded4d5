package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cli runs one command against addr and returns its exit code and output.
func cli(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = run(append([]string{args[0], "-addr", addr}, args[1:]...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCommands(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()

	code, out, errOut := cli(t, addr, "add", "7", "11", "3", "-repeat", "4", "-data", "poison")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "added 7/11: first firing 1970-01-01 00:00:10.03 UTC (tick 1003)\n", out)

	code, out, _ = cli(t, addr, "add", "7", "12", "20ms", "-every", "1", "-repeat", "forever") // 20ms = 2 ticks of 10ms
	require.Equal(t, 0, code)
	assert.Equal(t, "added 7/12: first firing 1970-01-01 00:00:10.02 UTC (tick 1002)\n", out)

	for _, bad := range []string{"0", "-1", "4294967295", "always"} { // forever is asked for by name
		code, _, errOut = cli(t, addr, "add", "7", "13", "1", "-repeat", bad)
		assert.NotEqual(t, 0, code, "-repeat %s", bad)
		assert.Contains(t, errOut, `or "forever"`, "-repeat %s", bad)
	}

	code, out, _ = cli(t, addr, "get", "7", "11")
	require.Equal(t, 0, code)
	assert.Equal(t, "7/11  due 1970-01-01 00:00:10.03 UTC (in 30ms)  every 30ms  fired 0/4  data \"poison\"\n", out)

	code, out, _ = cli(t, addr, "list", "7")
	require.Equal(t, 0, code)
	assert.Equal(t, "7/11  due 1970-01-01 00:00:10.03 UTC (in 30ms)  every 30ms  fired 0/4  data \"poison\"\n"+
		"7/12  due 1970-01-01 00:00:10.02 UTC (in 20ms)  every 10ms  fired 0/forever\n", out)

	code, out, _ = cli(t, addr, "list", "8")
	require.Equal(t, 0, code)
	assert.Equal(t, "receiver 8 has no timers\n", out)

	// watch in the background, fast-forward, see the events.
	var wout, werr syncBuffer
	done := make(chan int)
	go func() { done <- run([]string{"watch", "-addr", addr, "-n", "3", "7"}, &wout, &werr) }()
	require.Eventually(t, func() bool { return strings.Contains(wout.String(), "watching receiver 7") }, 5*time.Second, time.Millisecond)
	code, out, _ = cli(t, addr, "time", "ff", "3")
	require.Equal(t, 0, code)
	assert.Equal(t, "fast-forwarded 30ms to 1970-01-01 00:00:10.03 UTC: 3 timers fired\n", out)
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not exit after 3 events")
	}
	require.Equal(t, 0, code, werr.String())
	assert.Equal(t, "watching receiver 7 (0 waiting events, 0 dropped)\n"+
		"1970-01-01 00:00:10.02 UTC  7/12  fired 1/forever\n"+
		"1970-01-01 00:00:10.03 UTC  7/11  fired 1/4  data \"poison\"\n"+
		"1970-01-01 00:00:10.03 UTC  7/12  fired 2/forever\n", wout.String())

	code, out, _ = cli(t, addr, "cancel", "7", "12")
	require.Equal(t, 0, code)
	assert.Equal(t, "cancelled 7/12\n", out)

	code, out, _ = cli(t, addr, "ping")
	require.Equal(t, 0, code)
	assert.Equal(t, "pong: tw-time is 1970-01-01 00:00:10.03 UTC (tick 1003)\n", out)

	code, out, _ = cli(t, addr, "time", "speed", "60")
	require.Equal(t, 0, code)
	assert.Equal(t, "speed 60x: tw-time is 1970-01-01 00:00:10.03 UTC (tick 1003)\n", out)

	code, out, _ = cli(t, addr, "stats")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "timers      1\n")
	assert.Contains(t, out, "fired       3 (dropped 0)\n")
	assert.Contains(t, out, "speed 60x, frozen true")

	code, out, _ = cli(t, addr, "time", "resume")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "following the clock again: tw-time is ")
	code, out, _ = cli(t, addr, "time", "freeze")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "frozen: tw-time is ")
}

func TestCommandsJSON(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(500))
	code, out, _ := cli(t, srv.Addr(), "add", "-json", "1", "2", "5", "-data", "x")
	require.Equal(t, 0, code)
	var added map[string]uint64
	require.NoError(t, json.Unmarshal([]byte(out), &added))
	assert.Equal(t, map[string]uint64{"receiver": 1, "tid": 2, "due": 505}, added)

	code, out, _ = cli(t, srv.Addr(), "get", "-json", "1", "2")
	require.Equal(t, 0, code)
	var timer map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &timer))
	assert.Equal(t, float64(505), timer["due"])
	assert.Equal(t, "x", timer["data"])

	code, out, _ = cli(t, srv.Addr(), "ff", "-json", "5")
	require.Equal(t, 0, code)
	assert.JSONEq(t, `{"now":505,"fired":1}`, out)

	code, out, _ = cli(t, srv.Addr(), "stats", "-json")
	require.Equal(t, 0, code)
	var stats map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &stats))
	assert.Equal(t, float64(505), stats["now"])
	var keys []string
	for k := range stats {
		keys = append(keys, k)
	}
	// docs/PROTOCOL.md's names (example ok-stats).
	assert.ElementsMatch(t, []string{"now", "target", "lag", "timers", "sessions", "connections", "receivers",
		"backlog_events", "outbox_events", "waiting_firings", "fired_total", "dropped_total", "receiver_bytes", "retained_receivers",
		"tick_ns", "speed", "frozen"}, keys)
}

func TestCommandErrors(t *testing.T) {
	srv := localServer(t)
	addr := srv.Addr()
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"get", "1", "2"}, 1, "tickwheel get: "},
		{[]string{"cancel", "1", "2"}, 1, "not_found"},
		{[]string{"add", "1", "2", "18446744073709551615"}, 1, "invalid_argument"},
		{[]string{"add", "1", "2"}, 2, "usage: tickwheel add [flags] RECEIVER TID AFTER"},
		{[]string{"add", "x", "2", "3"}, 2, `receiver "x": want a non-negative integer`},
		{[]string{"add", "1", "2", "soon"}, 2, `after "soon": want ticks`},
		{[]string{"speed", "fast"}, 2, `speed "fast"`},
		{[]string{"speed", "0"}, 1, "invalid_argument"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := cli(t, addr, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.stderr)
		})
	}
	// No server there.
	code, _, errOut := cli(t, "127.0.0.1:1", "ping")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "tickwheel ping: ")
	// help
	var out bytes.Buffer
	assert.Equal(t, 0, run([]string{"help"}, &out, &out))
	assert.Contains(t, out.String(), "watch RECEIVER...")

}

// watch prints the events a receiver lost before its backlog.
func TestWatchDropped(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000), servertest.WithConfig(func(c *servertest.Config) { c.Limits.MaxBacklog = 2 }))
	addr := srv.Addr()
	code, _, errOut := cli(t, addr, "add", "9", "1", "1", "-repeat", "5")
	require.Equal(t, 0, code, errOut)
	srv.AdvanceTicks(5) // 5 events, unbound: 2 kept, 3 dropped
	var wout, werr syncBuffer
	code = run([]string{"watch", "-addr", addr, "-n", "3", "9"}, &wout, &werr)
	require.Equal(t, 0, code, werr.String())
	assert.Equal(t, "watching receiver 9 (2 waiting events, 3 dropped)\n"+
		"receiver 9: 3 events lost\n"+
		"1970-01-01 00:00:10.04 UTC  9/1  fired 4/5\n"+
		"1970-01-01 00:00:10.05 UTC  9/1  fired 5/5  last\n", wout.String())
}

// One of a thing is singular in the CLI's output: "1 timer fired", not
// "1 timers fired"; none or many are plural.
func TestCommandsSingular(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000), servertest.WithConfig(func(c *servertest.Config) { c.Limits.MaxBacklog = 1 }))
	addr := srv.Addr()
	code, _, errOut := cli(t, addr, "add", "9", "1", "1", "-repeat", "2")
	require.Equal(t, 0, code, errOut)
	code, out, _ := cli(t, addr, "ff", "1")
	require.Equal(t, 0, code)
	assert.Equal(t, "fast-forwarded 10ms to 1970-01-01 00:00:10.01 UTC: 1 timer fired\n", out)
	code, out, _ = cli(t, addr, "stats")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "lag 0s,")
	assert.Contains(t, out, "(backlog 1 event)\n")
	code, _, _ = cli(t, addr, "ff", "1") // 1 more event, 1 kept: 1 dropped
	require.Equal(t, 0, code)
	var wout, werr syncBuffer
	code = run([]string{"watch", "-addr", addr, "-n", "2", "9"}, &wout, &werr)
	require.Equal(t, 0, code, werr.String())
	assert.Equal(t, "watching receiver 9 (1 waiting event, 1 dropped)\n"+
		"receiver 9: 1 event lost\n"+
		"1970-01-01 00:00:10.02 UTC  9/1  fired 2/2  last\n", wout.String())
}

func TestCount(t *testing.T) {
	assert.Equal(t, "0 timers", count(0, "timer"))
	assert.Equal(t, "1 timer", count(uint64(1), "timer"))
	assert.Equal(t, "2 ticks", count(int64(2), "tick"))
}
