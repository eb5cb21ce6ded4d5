package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestMetricsCounts: requests by op, errors by code, the lateness runs of
// a turn's firings, and the load (top receivers, oldest queued event).
func TestMetricsCounts(t *testing.T) {
	h := newHarness(t, nil)
	h.c.SetMetrics(true)
	s := h.session()
	add := func(r, tid, after uint64) {
		msgs := h.do(s, protocol.Request{Op: protocol.OpAdd, Receiver: r, Tid: tid, After: after, Repeat: 1})
		require.Equal(t, protocol.KindOK, msgs[0].Kind)
	}
	for tid := uint64(1); tid <= 3; tid++ {
		add(5, tid, 1) // due start+1
	}
	add(5, 4, 3) // due start+3
	add(6, 1, 100)
	add(6, 2, 100)
	add(7, 1, 100)
	msgs := h.do(s, protocol.Request{Op: protocol.OpCancel, Receiver: 5, Tid: 99})
	require.Equal(t, protocol.KindError, msgs[0].Kind)
	require.Equal(t, uint64(7), h.c.Requests(protocol.OpAdd))
	require.Equal(t, uint64(1), h.c.Requests(protocol.OpCancel))
	require.Equal(t, uint64(1), h.c.Requests(protocol.OpHello))
	require.Equal(t, uint64(1), h.c.Errors(protocol.CodeNotFound))
	require.Equal(t, uint64(0), h.c.Errors(protocol.CodeExists))
	require.Equal(t, uint64(0), h.c.Requests(protocol.Op(200)), "an op out of range counts nothing")

	// One turn to start+3: three firings 2 ticks late, then one on time.
	h.c.Advance(start+3, 100)
	h.rep.sync()
	var runs []LateRun
	h.c.TakeLates(func(r []LateRun) { runs = append(runs, r...) })
	require.Equal(t, []LateRun{{Late: 2, N: 3}, {Late: 0, N: 1}}, runs)
	h.c.TakeLates(func([]LateRun) { t.Fatal("the runs were not forgotten") })

	ld := h.c.LoadOf(2, 100, 100)
	require.Equal(t, 2, ld.TimerReceivers)
	require.Equal(t, 1, ld.BacklogReceivers)
	require.True(t, ld.Queued)
	require.Equal(t, uint64(start+1), ld.OldestDue)
	require.Equal(t, []ReceiverLoad{{Receiver: 5, Backlog: 4}}, ld.TopBacklog)
	require.Equal(t, []ReceiverLoad{{Receiver: 6, Timers: 2}, {Receiver: 7, Timers: 1}}, ld.TopTimers)
	require.False(t, ld.Sampled)
	if ld := h.c.LoadOf(2, 100, 1); !ld.Sampled || len(ld.TopTimers) != 1 {
		t.Fatalf("a scan of 1 receiver: %+v", ld)
	}

	// Metrics off: no runs are kept.
	h.c.SetMetrics(false)
	add(8, 1, 1)
	h.c.Advance(start+4, 100)
	h.rep.sync()
	h.c.TakeLates(func([]LateRun) { t.Fatal("runs noted with metrics off") })
}

func TestInsertTop(t *testing.T) {
	var top []ReceiverLoad
	for i, n := range []int{3, 9, 1, 7, 9, 5} {
		top = insertTop(top, 3, ReceiverLoad{Receiver: uint64(i), Timers: n}, byTimers)
	}
	require.Equal(t, []ReceiverLoad{{Receiver: 1, Timers: 9}, {Receiver: 4, Timers: 9}, {Receiver: 3, Timers: 7}}, top)
	require.Empty(t, insertTop(nil, 0, ReceiverLoad{Timers: 1}, byTimers))
	top = nil
	for i, n := range []int{2, 8, 4} {
		top = insertTop(top, 2, ReceiverLoad{Receiver: uint64(i), Backlog: n, Timers: 100 - n}, byBacklog)
	}
	require.Equal(t, []ReceiverLoad{{Receiver: 1, Backlog: 8, Timers: 92}, {Receiver: 2, Backlog: 4, Timers: 96}}, top)
}
