package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// TestBulkCommands: add -group, list -group, and cancel, pause and resume
// of a timer, of -receiver R and of -group G, against a server; one of
// RECEIVER TID, -receiver or -group must be given.
func TestBulkCommands(t *testing.T) {
	addr := localServer(t, servertest.WithStartTick(1000)).Addr()
	ok := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := cli(t, addr, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		assert.Equal(t, want, out, args)
	}
	for _, k := range [][3]string{{"1", "1", "5"}, {"2", "1", "5"}, {"1", "2", "5"}, {"1", "9", ""}} {
		args := []string{"add", k[0], k[1], "10"}
		if k[2] != "" {
			args = append(args, "-group", k[2])
		}
		code, _, errOut := cli(t, addr, args...)
		require.Equal(t, 0, code, errOut)
	}
	ok("1/1  due 1970-01-01 00:00:10.1 UTC (in 100ms)  fired 0/1  group 5\n"+
		"1/2  due 1970-01-01 00:00:10.1 UTC (in 100ms)  fired 0/1  group 5\n"+
		"2/1  due 1970-01-01 00:00:10.1 UTC (in 100ms)  fired 0/1  group 5\n", "list", "-group", "5")
	ok("group 6 has no timers\n", "list", "-group", "6")
	ok("paused 3 timers of group 5; timers added to it start paused until `tickwheel resume -group 5`\n", "pause", "-group", "5")
	ok("2/1  paused with 100ms left  fired 0/1  group 5\n", "get", "2", "1")
	ok("resumed 3 timers of group 5\n", "resume", "-group", "5")
	ok("paused 1/9\n", "pause", "1", "9")
	ok("resumed 1/9\n", "resume", "1", "9")
	ok("paused 3 timers of receiver 1; timers added to it start paused until `tickwheel resume -receiver 1`\n", "pause", "-receiver", "1")
	ok("resumed 3 timers of receiver 1\n", "resume", "-receiver", "1")
	ok("cancelled 3 timers of group 5\n", "cancel", "-group", "5")
	ok("cancelled 1 timer of receiver 1\n", "cancel", "-receiver", "1")
	ok("receiver 1 has no timers\n", "list", "1")

	for _, bad := range [][]string{{"cancel"}, {"cancel", "1", "2", "-group", "5"}, {"pause", "1"}, {"resume", "-group", "0"},
		{"list", "1", "-group", "5"}, {"cancel", "-receiver", "x"}} {
		code, _, errOut := cli(t, addr, bad...)
		assert.Equal(t, 2, code, "%v: %s", bad, errOut)
	}
}

// TestTimeCommands: the tw-time commands are `time freeze|resume|speed|ff`;
// the old names still work for a release, saying so on stderr; resume
// without a timer, -receiver or -group is the old `resume`.
func TestTimeCommands(t *testing.T) {
	addr := localServer(t, servertest.WithStartTick(1000)).Addr()
	code, out, errOut := cli(t, addr, "time", "ff", "2")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "fast-forwarded 20ms to 1970-01-01 00:00:10.02 UTC: 0 timers fired\n", out)
	assert.Empty(t, errOut)
	for _, old := range []string{"ff", "freeze", "resume", "speed"} {
		args := []string{old}
		if old == "ff" || old == "speed" {
			args = append(args, "2")
		}
		code, _, errOut := cli(t, addr, args...)
		assert.Equal(t, 0, code, "%s: %s", old, errOut)
		assert.Equal(t, "tickwheel "+old+": now `tickwheel time "+old+"`; the old name goes in the next release\n", errOut)
	}
	code, _, errOut = cli(t, addr, "time", "warp")
	assert.Equal(t, 2, code)
	assert.Equal(t, "tickwheel time: want freeze, resume, speed or ff, got \"warp\"\n", errOut)
}

// TestResumeHelpIsTheTimerCommand: `resume -h` shows the help of the
// command named resume (a timer, a receiver or a group), not of its old
// alias `time resume`, while a bare `resume` is still that alias.
func TestResumeHelpIsTheTimerCommand(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"-json", "-h"}} {
		name, _, note := resolveCommand("resume", args)
		assert.Equal(t, "resume", name, "%v", args)
		assert.Empty(t, note)
	}
	name, _, note := resolveCommand("resume", nil)
	assert.Equal(t, "time resume", name)
	assert.NotEmpty(t, note)
}

// TestGroupFlagOneStyle: -group is read the same way by add, cancel,
// pause, resume and list: a bad value is refused with the command's
// prefix and the same words (not the flag package's "parse error"), and
// group 0 is no group: refused by the commands that act on a group, list
// included, and a timer in no group for add, as its -h says.
func TestGroupFlagOneStyle(t *testing.T) {
	addr := localServer(t, servertest.WithStartTick(1000)).Addr()
	cmds := map[string][]string{"add": {"add", "1", "1", "10"}, "cancel": {"cancel"}, "pause": {"pause"},
		"resume": {"resume"}, "list": {"list"}}
	for name, args := range cmds {
		for _, bad := range []string{"-1", "abc"} {
			code, out, errOut := cli(t, addr, append(args, "-group", bad)...)
			assert.Equal(t, 2, code, "%s -group %s", name, bad)
			assert.Empty(t, out)
			assert.Equal(t, "tickwheel "+name+": -group \""+bad+"\": want a non-negative integer\n", errOut)
		}
		if name == "add" {
			continue
		}
		code, out, errOut := cli(t, addr, append(args, "-group", "0")...)
		assert.Equal(t, 2, code, "%s -group 0", name)
		assert.Empty(t, out)
		assert.Equal(t, "tickwheel "+name+": -group 0: group 0 is no group\n", errOut)
	}

	code, _, errOut := cli(t, addr, "add", "1", "1", "10", "-group", "0")
	require.Equal(t, 0, code, errOut)
	code, out, _ := cli(t, addr, "get", "1", "1")
	require.Equal(t, 0, code)
	assert.Equal(t, "1/1  due 1970-01-01 00:00:10.1 UTC (in 100ms)  fired 0/1\n", out, "in no group")
	var help, errHelp syncBuffer
	require.Equal(t, 0, run([]string{"add", "-h"}, &help, &errHelp))
	assert.Contains(t, help.String(), "0 (the default) is no group")
}

// TestTimeFFZeroRefused: `time ff` wants a positive tick count or
// duration, as its error for -5 says; 0 and 0s are refused in those words
// (they were accepted, fast-forwarding nothing), and tw-time does not move.
func TestTimeFFZeroRefused(t *testing.T) {
	addr := localServer(t, servertest.WithStartTick(1000)).Addr()
	for _, zero := range []string{"0", "0s", "-5"} {
		code, out, errOut := cli(t, addr, "time", "ff", zero)
		assert.Equal(t, 2, code, zero)
		assert.Empty(t, out, zero)
		assert.Contains(t, errOut, "must be a positive tick count or duration", zero)
	}
	code, out, _ := cli(t, addr, "ping")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "(tick 1000)")
}

// TestBulkHelpPerCommand: each of cancel, pause and resume -h says what
// applies to it: cancel's says nothing of keeping remaining ticks or of
// timers starting paused, which are pause's and resume's.
func TestBulkHelpPerCommand(t *testing.T) {
	help := func(name string) string {
		var out, errOut syncBuffer
		require.Equal(t, 0, run([]string{name, "-h"}, &out, &errOut), errOut.String())
		return out.String()
	}
	cancel, pause, resume := help("cancel"), help("pause"), help("resume")
	for _, h := range []string{cancel, pause, resume} {
		assert.Contains(t, h, "Give one of: RECEIVER TID (one timer), -receiver R")
	}
	assert.NotContains(t, cancel, "remaining ticks")
	assert.NotContains(t, cancel, "start paused")
	assert.NotContains(t, cancel, "resume")
	assert.Contains(t, cancel, "A cancelled timer is gone")
	assert.Contains(t, pause, "pause keeps each timer's remaining ticks")
	assert.Contains(t, pause, "start paused until it is resumed")
	assert.NotContains(t, pause, "A cancelled timer")
	assert.Contains(t, resume, "resume gives each paused timer back the ticks it had left")
	assert.NotContains(t, resume, "A cancelled timer")
}

// TestTimeUsage: `time -h` prints a usage listing the four sub-commands
// on stdout (exit 0); a bare `time` prints it on stderr (exit 2). Both
// said only "want freeze, resume, speed or ff, got nothing".
func TestTimeUsage(t *testing.T) {
	for _, args := range [][]string{{"time", "-h"}, {"time", "--help"}, {"time", "help"}, {"time"}} {
		var out, errOut syncBuffer
		code := run(args, &out, &errOut)
		text := out.String()
		if len(args) == 1 {
			assert.Equal(t, 2, code)
			assert.Empty(t, out.String())
			text = errOut.String()
		} else {
			assert.Equal(t, 0, code, "%v", args)
			assert.Empty(t, errOut.String(), "%v", args)
		}
		assert.True(t, strings.HasPrefix(text, "usage: tickwheel time SUBCOMMAND"), "%v: %s", args, text)
		for _, sub := range []string{"time freeze ", "time resume ", "time speed X ", "time ff TICKS|DURATION "} {
			assert.Contains(t, text, "\n  "+sub, "%v", args)
		}
		assert.NotContains(t, text, "got nothing", "%v", args)
	}
}
