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
		want = append(want, fmt.Sprintf("7/%d  due at tick 1005 (in 5)  every 5  fired 0/1", tid))
	}
	code, out, errOut := cli(t, addr, "list", "7")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, strings.Join(want, "\n")+"\n", out)

	code, out, _ = cli(t, addr, "list", "-json", "7")
	require.Equal(t, 0, code)
	assert.Equal(t, 5, strings.Count(out, "\n"))
	assert.True(t, strings.HasPrefix(out, `{"data":"","due":1005,"every":5,"fired":0,"paused":false,"receiver":7,"remaining":5,"repeat":1,"tid":1}`), out)
}
