package wheel

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// withMapping skips t where nothing can be mapped outside the heap, and
// sets heapBlocks and mapMinEntries to hb and mm until t ends.
func withMapping(t *testing.T, hb int, mm uint64) {
	t.Helper()
	if m := bigmem.Map(bigmem.HugePage); m == nil {
		t.Skip("nothing can be mapped outside the heap here")
	} else {
		m.Free()
	}
	oldHB, oldMM := heapBlocks, mapMinEntries
	heapBlocks, mapMinEntries = hb, mm
	t.Cleanup(func() { heapBlocks, mapMinEntries = oldHB, oldMM })
}

// A wheel past its first heapBlocks blocks keeps its nodes outside the Go
// heap, and an index of mapMinEntries or more too (both set low here); once a move ends, the old
// table's memory is unmapped (Mapped counts exactly the regions and the
// table in use). A Frozen taken from the wheel encodes the same bytes after
// the wheel is dropped and collected (its blocks keep their regions mapped),
// and restores to the same timers.
func TestBigWheelOutsideHeap(t *testing.T) {
	withMapping(t, 64, 1<<19)
	before := bigmem.Mapped()
	w, err := New(0, Config{})
	require.NoError(t, err)
	const n = 420_000 // past heapBlocks; the index moves from 2^18 to 2^19 entries, then to 2^20
	for i := uint64(0); i < n || w.index.moving(); i++ {
		require.NoError(t, w.Add(Key{i % 1000, i}, Spec{After: 1 + i%5000, Every: 7}))
	}
	regions := map[*bigmem.Mem]bool{}
	for i, b := range w.nodes.arr.blocks {
		if i < heapBlocks {
			require.Nil(t, b.keep, "block %d is in the Go heap", i)
			continue
		}
		require.NotNil(t, b.keep, "block %d is outside the Go heap", i)
		regions[b.keep] = true
	}
	require.NotNil(t, w.index.table.mem, "the index's table is outside the Go heap")
	require.Nil(t, w.index.old.mem)
	want := int64(len(regions))*int64(regionBytes) + int64(len(w.index.table.mem.Bytes()))
	require.Equal(t, want, bigmem.Mapped()-before, "the regions and the table: no old table left mapped")

	snap := snapshotOf(t, w, 0)
	f := w.Freeze()
	count := w.Len()
	w = nil
	for range 3 {
		runtime.GC()
	}
	var out []byte
	for done := false; !done; {
		out, done = f.AppendNext(out, 1<<20)
	}
	f.Release()
	require.Equal(t, snap, out, "the Frozen read its nodes after the wheel was collected")
	r, err := Restore(Config{}, out)
	require.NoError(t, err)
	require.Equal(t, count, r.Len())
	requireSameState(t, snap, snapshotOf(t, r, 0))
}

// A wheel's MappedBytes counts its regions and its tables, and is what the
// process's total grew by when nothing else was mapped meanwhile.
func TestWheelMappedBytes(t *testing.T) {
	withMapping(t, 8, 1<<19)
	w, err := New(0, Config{})
	require.NoError(t, err)
	require.Zero(t, w.MappedBytes())
	before := settledMapped() // no other test's wheel left to collect meanwhile
	for i := uint64(0); i < 300_000; i++ {
		require.NoError(t, w.Add(Key{i % 100, i}, Spec{After: 1 + i%1000}))
		if i%50_000 == 0 {
			require.Equal(t, bigmem.Mapped()-before, w.MappedBytes(), "after %d adds", i)
		}
	}
	require.Equal(t, bigmem.Mapped()-before, w.MappedBytes())
	require.Greater(t, w.MappedBytes(), int64(regionBytes))
	runtime.KeepAlive(w)
}
