package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// TestErrorsReadOnce: a server's error reply reads "tickwheel CMD: code:
// message", with no prefix repeated.
func TestErrorsReadOnce(t *testing.T) {
	srv := localServer(t)
	code, _, errOut := cli(t, srv.Addr(), "cancel", "1", "2")
	assert.Equal(t, 1, code)
	assert.Equal(t, "tickwheel cancel: not_found: timer not found\n", errOut)
	code, _, errOut = cli(t, srv.Addr(), "add", "1", "2", "18446744073709551615")
	assert.Equal(t, 1, code)
	assert.Equal(t, "tickwheel add: invalid_argument: due tick overflows uint64\n", errOut)
	code, _, errOut = cli(t, "127.0.0.1:1", "ping")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^tickwheel ping: [^t]`, errOut, "no second tickwheel: prefix")
}

// TestAdminTokenHint: an admin command refused for want of a token says
// where the CLI looked for the admin token and how to give one.
func TestAdminTokenHint(t *testing.T) {
	srv := servertest.RunT(t) // a random admin token, in no data directory
	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	require.NoError(t, err)
	code, _, errOut := cli(t, srv.Addr(), "stats")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "tickwheel stats: unauthorized: ")
	for _, w := range []string{filepath.Join(wd, "tickwheel-data", "admin.token"), "-token-file", "$TICKWHEEL_TOKEN", "-data-dir"} {
		assert.Contains(t, errOut, w)
	}
}
