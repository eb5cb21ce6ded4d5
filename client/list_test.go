package client

import (
	"io"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
)

func tidsOf(ts []Timer) []uint64 {
	out := make([]uint64, len(ts))
	for i := range ts {
		out[i] = ts[i].Tid
	}
	return out
}

// TestListPaging: List gathers every page; ListPage returns one, with the
// server's max_list_page for limit <= 0 or above it.
func TestListPaging(t *testing.T) {
	srv := startServer(t, func(c *server.Config) { c.Limits.MaxListPage = 10 })
	c := dial(t, srv.Addr())
	ctx := tctx(t)
	var want []uint64
	for i := range 95 {
		tid := uint64(i*7919) % 1000 // distinct, added out of order
		_, err := c.Add(ctx, 3, tid, 5, &AddOptions{Data: []byte{byte(tid)}})
		require.NoError(t, err)
		want = append(want, tid)
	}
	slices.Sort(want)

	all, err := c.List(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, want, tidsOf(all))
	for _, tm := range all {
		assert.Equal(t, []byte{byte(tm.Tid)}, tm.Data)
	}

	for _, limit := range []int{0, -1, 10, 11, math.MaxInt} {
		ts, next, err := c.ListPage(ctx, 3, 0, limit)
		require.NoError(t, err)
		assert.Equal(t, want[:10], tidsOf(ts), "limit %d", limit)
		assert.Equal(t, want[10], next)
	}
	ts, next, err := c.ListPage(ctx, 3, want[10], 3)
	require.NoError(t, err)
	assert.Equal(t, want[10:13], tidsOf(ts))
	assert.Equal(t, want[13], next)
	ts, next, err = c.ListPage(ctx, 3, want[90]+1, 0)
	require.NoError(t, err)
	assert.Equal(t, want[91:], tidsOf(ts))
	assert.Zero(t, next)

	ts, next, err = c.ListPage(ctx, 4, 0, 0)
	require.NoError(t, err)
	assert.NotNil(t, ts)
	assert.Empty(t, ts)
	assert.Zero(t, next)
	ts, err = c.List(ctx, 4)
	require.NoError(t, err)
	assert.NotNil(t, ts, "an empty slice, not nil")
	assert.Empty(t, ts)
}

// TestListServerReplies: a server from before paging (no next) gives one
// page; a next that does not move on is a bad reply, not an endless List.
func TestListServerReplies(t *testing.T) {
	timers := []protocol.Timer{{Receiver: 1, Tid: 5, Repeat: 1}, {Receiver: 1, Tid: 9, Repeat: 3}} // counts: read back as sent
	// The timers array as encoded: a list reply [0, 0, [timers, 0]] less
	// its header, its first four bytes and next.
	enc := protocol.AppendListOK(nil, 0, timers, 0)
	arr := enc[protocol.HeaderSize+4 : len(enc)-1]
	for _, tt := range []struct {
		name   string
		result []byte // the ok reply's result
		err    bool
	}{
		{"no next", append([]byte{0x91}, arr...), false},
		{"next not past the page", append(append([]byte{0x92}, arr...), 0x09), true},
		{"next does not move on", []byte{0x92, 0x90, 0x03}, true}, // from 0, then from 3 again
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := startFake(t, func(w io.Writer, req protocol.Request) bool {
				_, err := w.Write(frameOf(append([]byte{0x93, 0x00, byte(req.ID)}, tt.result...)))
				return err == nil
			})
			c := dial(t, f.addr())
			ts, err := c.List(tctx(t), 1)
			if !tt.err {
				require.NoError(t, err)
				assert.Equal(t, timers, ts)
				return
			}
			require.ErrorIs(t, err, protocol.ErrMalformed)
			assert.Contains(t, err.Error(), "list: bad reply")
		})
	}
}

// frameOf wraps a payload in a frame header.
func frameOf(payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, payload...)
}
