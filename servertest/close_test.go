package servertest_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/servertest"
)

// Close may be called twice, from two goroutines at once, and on a RunT
// server before its test ends; Addr, Tick and AdminToken still answer
// after it, and a call that needs the server says it was closed.
func TestClose(t *testing.T) {
	s, err := servertest.Run()
	require.NoError(t, err)
	addr, tick, tok := s.Addr(), s.Tick(), s.AdminToken()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(s.Close)
	}
	wg.Wait()
	s.Close()
	assert.Equal(t, addr, s.Addr())
	assert.Equal(t, tick, s.Tick())
	assert.Equal(t, tok, s.AdminToken())
	assert.PanicsWithValue(t, "servertest: Now after Close", func() { s.Now() })
	assert.PanicsWithValue(t, "servertest: DropConnections after Close", func() { s.DropConnections() })

	r := servertest.RunT(t)
	r.Close()
}
