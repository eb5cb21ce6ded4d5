package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelp: -h, -help, --help and help print the commands, one line each,
// then the server's flags, on stdout, and exit 0; so does COMMAND -h, with
// the command's flags.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		var out, errOut syncBuffer
		code := run([]string{arg}, &out, &errOut)
		assert.Equal(t, 0, code, "%s: %s", arg, errOut.String())
		assert.Empty(t, errOut.String(), arg)
		help := out.String()
		cmds, flags, ok := strings.Cut(help, "server flags:")
		require.True(t, ok, "%s: %s", arg, help)
		for name := range commands {
			n := 0
			for _, line := range strings.Split(cmds, "\n") {
				if strings.HasPrefix(line, "  "+name+" ") {
					n++
				}
			}
			assert.Equal(t, 1, n, "%s: one line for %s in\n%s", arg, name, cmds)
		}
		assert.Contains(t, cmds, "  health ", arg)
		assert.Contains(t, flags, "-fsync", arg)
		assert.Contains(t, flags, "-data-dir", arg)
	}
	for _, name := range []string{"add", "watch", "ping", "health"} {
		var out, errOut syncBuffer
		code := run([]string{name, "-h"}, &out, &errOut)
		assert.Equal(t, 0, code, "%s -h: %s", name, errOut.String())
		assert.Contains(t, out.String(), "usage: tickwheel "+name, name)
		assert.Contains(t, out.String(), "-timeout", name)
	}
}

// TestNegativeArgs: a negative number where a positional argument goes is
// reported in one line naming the argument, not as an unknown flag.
// TestHelpAnywhere: -h after other flags, and help COMMAND, print the
// usage asked for on stdout and exit 0.
func TestHelpAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"health", "-json", "-h"}, "usage: tickwheel health"},
		{[]string{"-addr", "127.0.0.1:1", "-h"}, "server flags:"},
		{[]string{"serve", "-tick", "5ms", "--help"}, "server flags:"},
		{[]string{"add", "-json", "-h"}, "usage: tickwheel add"},
		{[]string{"help", "add"}, "usage: tickwheel add"},
		{[]string{"help", "health"}, "usage: tickwheel health"},
	} {
		var out, errOut syncBuffer
		code := run(tc.args, &out, &errOut)
		assert.Equal(t, 0, code, "%v: %s", tc.args, errOut.String())
		assert.Empty(t, errOut.String(), tc.args)
		assert.Contains(t, out.String(), tc.want, tc.args)
	}
}

func TestNegativeArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "1", "2", "-5"}, "tickwheel add: AFTER must be a tick count or a duration (0: at the next tick), got -5\n"},
		{[]string{"add", "1", "2", "-5s"}, "tickwheel add: AFTER must be a tick count or a duration (0: at the next tick), got -5s\n"},
		{[]string{"add", "-1", "2", "5"}, "tickwheel add: RECEIVER must be a non-negative integer, got -1\n"},
		{[]string{"time", "speed", "-1"}, "tickwheel time speed: X must be a positive number, got -1\n"},
		{[]string{"time", "ff", "-5"}, "tickwheel time ff: TICKS|DURATION must be a positive tick count or duration, got -5\n"},
		{[]string{"cancel", "-1", "2"}, "tickwheel cancel: RECEIVER must be a non-negative integer, got -1\n"},
		{[]string{"watch", "1", "-2"}, "tickwheel watch: RECEIVER must be a non-negative integer, got -2\n"},
	} {
		code, out, errOut := cli(t, "127.0.0.1:1", tc.args...)
		assert.Equal(t, 2, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Equal(t, tc.want, errOut, tc.args)
	}
	// A flag's value may still be negative: -repeat's own check reports it.
	code, _, errOut := cli(t, localServer(t).Addr(), "add", "1", "2", "3", "-repeat", "-1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `-repeat "-1"`)
}

// TestExtraArgument: an argument too many is named.
func TestExtraArgument(t *testing.T) {
	for _, args := range [][]string{
		{"add", "1", "2", "3", "-repeat", "4", "extra"},
		{"ping", "extra"},
		{"get", "1", "2", "extra", "-json"},
	} {
		code, _, errOut := cli(t, "127.0.0.1:1", args...)
		assert.Equal(t, 2, code, args)
		assert.Contains(t, errOut, `tickwheel `+args[0]+`: unexpected argument "extra"`, args)
		assert.Contains(t, errOut, "usage: tickwheel "+args[0], args)
	}
}
