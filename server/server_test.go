package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestSeedExampleOverTheWire: the design document's example, driven by admin
// fast-forward one tick at a time.
func TestSeedExampleOverTheWire(t *testing.T) {
	const T = 1587848614
	srv := startServer(t, func(c *Config) { c.StartTick = T })
	c := helloClient(t, srv, "seed")
	c.uints(protocol.Request{Op: protocol.OpBind, Receiver: 1})
	c.uints(protocol.Request{Op: protocol.OpBind, Receiver: 2})
	assert.Equal(t, []uint64{T + 3}, c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 11, After: 3, Repeat: 4}))
	c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 1, Tid: 12, After: 1, Repeat: 5})
	c.uints(protocol.Request{Op: protocol.OpAdd, Receiver: 2, Tid: 20, After: 3})
	for range 15 {
		c.uints(protocol.Request{Op: protocol.OpFastForward, Ticks: 1})
	}
	var lines []string
	for _, m := range c.events {
		f := m.Fire
		lines = append(lines, fmt.Sprintf("T+%d tid=%d fired=%d last=%v", f.Tick-T, f.Tid, f.Fired, f.Last))
	}
	assert.Equal(t, []string{
		"T+1 tid=12 fired=1 last=false",
		"T+2 tid=12 fired=2 last=false",
		"T+3 tid=11 fired=1 last=false", // rounds by receiver: 1's first, 2's first, 1's second
		"T+3 tid=20 fired=1 last=false",
		"T+3 tid=12 fired=3 last=false",
		"T+4 tid=12 fired=4 last=false",
		"T+5 tid=12 fired=5 last=true",
		"T+6 tid=11 fired=2 last=false",
		"T+6 tid=20 fired=2 last=false",
		"T+9 tid=11 fired=3 last=false",
		"T+9 tid=20 fired=3 last=false",
		"T+12 tid=11 fired=4 last=true",
		"T+12 tid=20 fired=4 last=false",
		"T+15 tid=20 fired=5 last=false",
	}, lines)
	require.NotEmpty(t, c.events)
}
