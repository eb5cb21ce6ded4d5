package session

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// listAll pages through receiver with limit and returns every timer and the
// pages' sizes, checking the paging contract on the way: each page is in
// ascending tid order, starts at from, and next is past its last tid.
func (c *client) listAll(receiver, limit uint64) (all []protocol.Timer, sizes []int) {
	c.t.Helper()
	var from uint64
	for {
		ts, next := c.listPage(receiver, from, limit)
		require.True(c.t, slices.IsSortedFunc(ts, func(a, b protocol.Timer) int { return cmpUint(a.Tid, b.Tid) }), "page in tid order")
		if len(ts) > 0 {
			require.GreaterOrEqual(c.t, ts[0].Tid, from)
		}
		all = append(all, ts...)
		sizes = append(sizes, len(ts))
		if next == 0 {
			return all, sizes
		}
		require.NotEmpty(c.t, ts, "a page with a next holds a timer")
		require.Greater(c.t, next, ts[len(ts)-1].Tid)
		from = next
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addMany adds timers (receiver, tid) for each tid, with data, pipelined.
func (c *client) addMany(receiver uint64, tids []uint64, data func(tid uint64) []byte) {
	c.t.Helper()
	first := c.id + 1
	for _, tid := range tids {
		c.send(protocol.Request{Op: protocol.OpAdd, Receiver: receiver, Tid: tid, After: 1000 + tid%1000, Data: data(tid)})
	}
	for id := first; id <= c.id; id++ {
		m := c.reply(id)
		require.Equal(c.t, protocol.KindOK, m.Kind, "add: %s %s", m.Code, m.Text)
	}
}

func tidData(tid uint64) []byte { return binary.BigEndian.AppendUint64(nil, tid) }

// TestListPages: 2,500 timers with data, added in random tid order (with the
// extreme tids 0 and 2^64-1), come back each exactly once in tid order,
// whatever the page size; a list of another receiver is untouched by them.
func TestListPages(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("c")
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[uint64]bool{0: true, math.MaxUint64: true}
	tids := []uint64{0, math.MaxUint64}
	for len(tids) < 2500 {
		tid := rng.Uint64() >> rng.IntN(64)
		if !seen[tid] {
			seen[tid] = true
			tids = append(tids, tid)
		}
	}
	rng.Shuffle(len(tids), func(i, j int) { tids[i], tids[j] = tids[j], tids[i] })
	c.addMany(1, tids, tidData)
	c.addMany(2, tids[:10], tidData)
	want := slices.Sorted(slices.Values(tids))

	for _, limit := range []uint64{0, 1, 7, 1000, 2499, 2500, 2501, math.MaxUint64} {
		all, sizes := c.listAll(1, limit)
		got := make([]uint64, len(all))
		for i, tm := range all {
			got[i] = tm.Tid
			require.Equal(t, uint64(1), tm.Receiver)
			require.Equal(t, tidData(tm.Tid), tm.Data, "limit %d: tid %d", limit, tm.Tid)
			require.Equal(t, start+1000+tm.Tid%1000, tm.Due)
		}
		require.Equal(t, want, got, "limit %d: every timer once, in tid order", limit)
		page := 1000 // max_list_page's default
		if limit != 0 && limit < 1000 {
			page = int(limit)
		}
		for i, n := range sizes[:len(sizes)-1] {
			require.Equal(t, page, n, "limit %d: page %d is full", limit, i)
		}
	}
	ts, next := c.listPage(2, 0, 0)
	assert.Len(t, ts, 10)
	assert.Zero(t, next)
}

// TestListPageBytes: a page stops before its reply passes max_list_bytes,
// holding as many timers as fit; a timer with the most data fits alone.
func TestListPageBytes(t *testing.T) {
	const maxData, maxBytes = 1000, 10_000
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxData, l.MaxListBytes = maxData, maxBytes })
	c := h.client("c")
	require.Equal(t, maxBytes, h.c.Limits().MaxListBytes)
	tids := make([]uint64, 100)
	for i := range tids {
		tids[i] = uint64(i) * 3
	}
	size := func(tid uint64) int { return int(tid*37) % (maxData + 1) }
	c.addMany(1, tids, func(tid uint64) []byte { return make([]byte, size(tid)) })

	var from uint64
	var got []uint64
	pages := 0
	for {
		ts, next := c.listPage(1, from, 0)
		pages++
		require.NotEmpty(t, ts)
		encoded := len(protocol.AppendListOK(nil, c.id, ts, next))
		require.LessOrEqual(t, encoded, maxBytes, "page %d", pages)
		for _, tm := range ts {
			got = append(got, tm.Tid)
			require.Len(t, tm.Data, size(tm.Tid))
		}
		if next == 0 {
			break
		}
		// The page is full: the next timer would not have fitted.
		left, _ := c.listPage(1, next, 1)
		require.Len(t, left, 1)
		require.Equal(t, next, left[0].Tid, "next is the first timer left out")
		bound := protocol.ListReplyOverhead + protocol.TimerSize(&left[0])
		for i := range ts {
			bound += protocol.TimerSize(&ts[i])
		}
		require.Greater(t, bound, maxBytes, "page %d could have held tid %d", pages, next)
		from = next
	}
	assert.Equal(t, tids, got)
	assert.Greater(t, pages, 5)

	// max_list_bytes at its least, max_data + 256: one timer with the most
	// data per page.
	h = newHarness(t, func(_ *Config, l *Limits) { l.MaxData, l.MaxListBytes = maxData, maxData+256 })
	c = h.client("c")
	c.addMany(1, []uint64{math.MaxUint64 - 1, math.MaxUint64, 5}, func(uint64) []byte { return make([]byte, maxData) })
	all, sizes := c.listAll(1, 0)
	assert.Equal(t, []int{1, 1, 1}, sizes)
	assert.Equal(t, []uint64{5, math.MaxUint64 - 1, math.MaxUint64}, []uint64{all[0].Tid, all[1].Tid, all[2].Tid})
}

// TestListPageLimits: limit 0 and limits above max_list_page give
// max_list_page timers; smaller limits are kept; next is the first tid left
// out.
func TestListPageLimits(t *testing.T) {
	h := newHarness(t, func(_ *Config, l *Limits) { l.MaxListPage = 100 })
	c := h.client("c")
	tids := make([]uint64, 250)
	for i := range tids {
		tids[i] = uint64(i) + 10
	}
	c.addMany(1, tids, func(uint64) []byte { return nil })
	for _, tt := range []struct {
		limit uint64
		n     int
	}{{0, 100}, {math.MaxUint64, 100}, {101, 100}, {100, 100}, {99, 99}, {30, 30}, {1, 1}} {
		ts, next := c.listPage(1, 0, tt.limit)
		require.Len(t, ts, tt.n, "limit %d", tt.limit)
		assert.Equal(t, uint64(10), ts[0].Tid)
		assert.Equal(t, uint64(10+tt.n), next, "limit %d", tt.limit)
	}
	ts, next := c.listPage(1, 200, math.MaxUint64)
	assert.Len(t, ts, 60, "the last page")
	assert.Zero(t, next)
	_, sizes := c.listAll(1, 0)
	assert.Equal(t, []int{100, 100, 50}, sizes)
}

// TestListPageEdges: an empty receiver, a from_tid past the last tid, a
// from_tid of 2^64-1, and a request in the form from before paging.
func TestListPageEdges(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client("c")
	ts, next := c.listPage(7, 0, 0)
	assert.Empty(t, ts, "no timers")
	assert.Zero(t, next)

	c.addMany(1, []uint64{3, 9, math.MaxUint64}, tidData)
	ts, next = c.listPage(1, 10, 0)
	require.Len(t, ts, 1)
	assert.Equal(t, uint64(math.MaxUint64), ts[0].Tid)
	assert.Zero(t, next)
	ts, next = c.listPage(1, math.MaxUint64, 5)
	require.Len(t, ts, 1, "from_tid is inclusive")
	assert.Zero(t, next)
	c.uints(protocol.Request{Op: protocol.OpCancel, Receiver: 1, Tid: math.MaxUint64})
	ts, next = c.listPage(1, 10, 0)
	assert.Empty(t, ts, "from_tid past the last tid")
	assert.Zero(t, next)
	ts, next = c.listPage(1, 4, 1)
	require.Len(t, ts, 1)
	assert.Equal(t, uint64(9), ts[0].Tid)
	assert.Zero(t, next, "the last page, though full")

	// [7, id, receiver], as sent by a client from before paging: the first
	// page; such a client reads only the timers.
	c.id++
	h.apply(c.s, []byte{0x93, 0x07, byte(c.id), 0x01})
	m := c.reply(c.id)
	require.Equal(t, protocol.KindOK, m.Kind)
	ts, next, err := protocol.DecodeListPage(m.Result, nil)
	require.NoError(t, err)
	assert.Len(t, ts, 2)
	assert.Zero(t, next)
	old, err := protocol.DecodeList(m.Result, nil)
	require.NoError(t, err)
	assert.Equal(t, ts, old)
}
