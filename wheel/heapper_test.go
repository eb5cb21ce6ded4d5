package wheel

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// A big wheel's timers outside the Go heap leave little of themselves in
// it: the blocks' per-page state, the free set and the barrier's claim
// words. At 100M timers every byte a timer of heap is about two of RSS
// (the heap's and the collector's room over it, at the server's pace of
// 100 for a heap with no timers in it), against a budget of 64 a timer
// with the 56-byte node and the index. A slab block held a pointer and an
// epoch per page of 16 nodes: 1.6 bytes a timer in all here, now 0.75
// (the pages' epochs 0.28, the claim words 0.25, the free set 0.13).
func TestBigWheelHeapPerTimer(t *testing.T) {
	withMapping(t, 0, 1<<16)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	w, err := New(0, Config{})
	require.NoError(t, err)
	const n = 1_000_000
	for i := uint64(0); i < n || w.index.moving(); i++ {
		require.NoError(t, w.Add(Key{i % 1000, i}, Spec{After: 1 + i%5000}))
	}
	perTimer := float64(heap()-before) / float64(w.Len())
	t.Logf("%.3f bytes a timer in the Go heap", perTimer)
	require.Less(t, perTimer, 0.9, "a timer outside the heap keeps under 0.9 bytes in it")
	runtime.KeepAlive(w)
}
