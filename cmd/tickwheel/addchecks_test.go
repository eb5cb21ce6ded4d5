package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
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

// -at 0 is refused by the CLI, saying what -at wants, not by the server
// talking about an "after" the user never gave.
func TestAddAtZeroRefused(t *testing.T) {
	srv := servertest.RunT(t, servertest.WithStartTick(1000))
	_, _, errOut := cli(t, srv.Addr(), "add", "-token", srv.AdminToken(), "2", "3", "-at", "0")
	assert.NotContains(t, errOut, "after must be at least 1 tick")
	assert.Contains(t, errOut, "-at 0")
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
