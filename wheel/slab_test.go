package wheel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSlabBarrierDroppedAfterSnapshot: slab.at takes its slow path (the
// page's epoch, the write barrier) only while a barrier is in the slab's
// list, and the first write after a snapshot's walk ended drops the
// barrier, so that the writes after it take the fast path again (get) and
// still change the live timers only: the snapshot taken while writing
// holds the state at its Freeze, and the wheel the state after. Before,
// a write to a stale page with no Frozen pinned adopted the page without
// looking at the list, which kept a barrier that was over until the next
// Freeze.
func TestSlabBarrierDroppedAfterSnapshot(t *testing.T) {
	w := newWheel(t, 0, Config{})
	n := uint64(3 * blockLen)
	for i := range n {
		require.NoError(t, w.Add(Key{1 + i%7, i}, Spec{After: 1_000 + i%5000}))
	}
	want := snapshotOf(t, w, 0)
	for round := range 3 {
		f := w.Freeze()
		require.Len(t, w.nodes.bars, 1, "round %d: a Freeze adds its barrier", round)
		var got []byte
		for done := false; !done; {
			got, done = f.AppendNext(got, 100)
			// Writes to timers on every page while the encoder walks.
			for i := uint64(len(got)) % 89; i < n; i += 89 {
				require.NoError(t, w.Pause(Key{1 + i%7, i}))
				require.NoError(t, w.Resume(Key{1 + i%7, i}))
			}
		}
		requireSameState(t, want, got, "round %d: the snapshot holds the state at its Freeze", round)
		f.Release()
		require.NoError(t, w.Add(Key{99, uint64(round)}, Spec{After: 7}))
		require.Empty(t, w.nodes.bars, "round %d: the write after the walk drops the barrier", round)
		require.NoError(t, w.Cancel(Key{99, uint64(round)}))
		want = snapshotOf(t, w, 0)
	}
	for i := range n {
		_, err := w.Get(Key{1 + i%7, i})
		require.NoError(t, err, "timer %d", i)
	}
}
