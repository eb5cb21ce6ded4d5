package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// TestAddAt: -at takes the place of AFTER, which may be left out or given
// as 0; any other AFTER with -at is refused, and nothing is added.
func TestAddAt(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	code, out, errOut := cli(t, addr, "add", "1", "2", "-at", "2000")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "added 1/2: first firing 1970-01-01 00:00:20 UTC (tick 2000)\n", out)
	code, out, errOut = cli(t, addr, "add", "1", "3", "0", "-at", "3000")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "added 1/3: first firing 1970-01-01 00:00:30 UTC (tick 3000)\n", out)

	code, out, errOut = cli(t, addr, "add", "1", "4", "5", "-at", "99999999999999")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "tickwheel add: AFTER 5 and -at 99999999999999: give one (-at is the first firing)\n", errOut)
	code, _, _ = cli(t, addr, "get", "1", "4")
	assert.Equal(t, 1, code, "nothing added")
}

// TestAddEveryOneShot: -every on a timer that fires once is refused (it
// would have no effect), with how to ask for repeats; nothing is added.
func TestAddEveryOneShot(t *testing.T) {
	srv := localServer(t, servertest.WithStartTick(1000))
	addr := srv.Addr()
	for _, args := range [][]string{
		{"add", "1", "41", "10", "-every", "5s"},
		{"add", "1", "41", "10", "-every", "5", "-repeat", "1"},
	} {
		code, out, errOut := cli(t, addr, args...)
		assert.Equal(t, 2, code, args)
		assert.Empty(t, out, args)
		assert.Equal(t, "tickwheel add: -every has no effect on a timer that fires once: add -repeat N (N > 1) or -repeat forever\n", errOut, args)
	}
	code, _, _ := cli(t, addr, "get", "1", "41")
	assert.Equal(t, 1, code, "nothing added")
	code, _, errOut := cli(t, addr, "add", "1", "41", "10", "-every", "5", "-repeat", "2")
	assert.Equal(t, 0, code, errOut)
}

// TestAddToPausedSaysPaused: a timer added to a paused group or receiver
// starts paused, and add says so ("paused with 20ms left"), where it
// printed the add reply's first firing as if it ran; -json has "paused"
// and "remaining". Added to a running receiver, add prints the first
// firing as before, and again once the group is resumed.
func TestAddToPausedSaysPaused(t *testing.T) {
	addr := localServer(t, servertest.WithStartTick(1000)).Addr()
	ok := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := cli(t, addr, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		assert.Equal(t, want, out, args)
	}
	ok("paused 0 timers of group 5; timers added to it start paused until `tickwheel resume -group 5`\n", "pause", "-group", "5")
	ok("added 9/1: paused with 20ms left (its receiver 9 or group 5 is paused): it runs once resumed\n",
		"add", "9", "1", "2", "-group", "5")
	ok("9/1  paused with 20ms left  fired 0/1  group 5\n", "get", "9", "1")
	ok("added 9/2: first firing 1970-01-01 00:00:10.02 UTC (tick 1002)\n", "add", "9", "2", "2", "-group", "6")

	ok("paused 0 timers of receiver 8; timers added to it start paused until `tickwheel resume -receiver 8`\n", "pause", "-receiver", "8")
	ok("added 8/1: paused with 30ms left (its receiver 8 is paused): it runs once resumed\n", "add", "8", "1", "3")
	ok(`{"due":1003,"paused":true,"receiver":8,"remaining":3,"tid":2}`+"\n", "add", "8", "2", "3", "-json")

	ok("resumed 1 timer of group 5\n", "resume", "-group", "5")
	ok("added 9/3: first firing 1970-01-01 00:00:10.02 UTC (tick 1002)\n", "add", "9", "3", "2", "-group", "5")
}
