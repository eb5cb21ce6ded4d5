package wheel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// A restore of a wheel past heapBlocks (set low here) maps the regions of
// its nodes at the header, and its Prefaulter populates them up to two
// regions past each mark, never further: a header that claims far more
// timers than follow costs two regions of RAM, not its count. The wheel
// restored with a Prefaulter running is the one restored without.
func TestPrefaulterPopulatesAhead(t *testing.T) {
	withMapping(t, 4, mapMinEntries)
	m := bigmem.Map(bigmem.HugePage)
	if !m.Populate(0, bigmem.HugePage) {
		t.Skip("the kernel cannot populate here (Linux 5.14+)")
	}
	m.Free()

	w := newWheel(t, 0, Config{})
	const n = 600_000 // 8,192 nodes in the heap, then 3 regions of 262,144
	for i := range uint64(n) {
		require.NoError(t, w.Add(Key{i % 5000, i}, Spec{After: 1 + i%100_000}))
	}
	snap := snapshotOf(t, w, 0)

	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write(snap[:64])
	require.NoError(t, err)
	pf := r.Prefaulter()
	require.NotNil(t, pf)
	require.Len(t, pf.regions, 3)
	require.Equal(t, uint64(heapBlocks*blockLen), pf.first)
	pf.Upto(r.Ready())
	require.Equal(t, 2, pf.done, "two regions ahead of the first mark, not the third")
	_, err = r.Write(snap[64:])
	require.NoError(t, err)
	pf.Upto(r.Ready())
	require.Equal(t, 3, pf.done)
	got, err := r.Wheel()
	require.NoError(t, err)
	requireSameWheels(t, w, got, receiversOf(w))

	lie := rawSnapshot(7, 1<<26, rec(recEveryDelay, 1, 1, 5))
	r, pf = headerOnly(t, lie)
	require.Greater(t, len(pf.regions), 200, "the count's regions are mapped")
	pf.Upto(r.Ready())
	require.Equal(t, 2, pf.done, "but only two are populated")
}

// TestPrefaulterPopulatesIndex: the Prefaulter of a restore whose index is
// partitioned populates the index's table (and ext) a step at a time, up
// to the share of the header's count the records written so far are, and
// all of it once they are all written; the wheel restored is the one
// saved. A header that claims more timers than its records has nothing
// of the table populated for them; an index that is not partitioned
// (filled as it is read) is left to the builder.
func TestPrefaulterPopulatesIndex(t *testing.T) {
	if m := bigmem.Map(bigmem.HugePage); m == nil || !m.Populate(0, bigmem.HugePage) {
		t.Skip("the kernel cannot populate here (Linux 5.14+)")
	} else {
		m.Free()
	}
	withParts(t, 12, 256)
	old := indexStep
	indexStep = 64 << 10
	t.Cleanup(func() { indexStep = old })

	w := newWheel(t, 0, Config{})
	const n = 300_000 // a table of 2^19 entries (2 MiB): 32 steps
	for i := range uint64(n) {
		require.NoError(t, w.Add(Key{i % 5000, i}, Spec{After: 1 + i%100_000}))
	}
	snap := snapshotOf(t, w, 0)
	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write(snap[:len(snap)/2])
	require.NoError(t, err)
	pf := r.Prefaulter()
	require.NotNil(t, pf)
	require.NotNil(t, pf.table, "the index is partitioned")
	require.Equal(t, uintptr(2<<20), pf.tableBytes)
	for pf.Index(r.Ready()) {
	}
	share := float64(pf.tableBytes) * float64(uint64(r.Ready().n)-pf.base) / n
	require.LessOrEqual(t, float64(pf.indexDone), share, "no more than the records' share")
	require.Greater(t, float64(pf.indexDone), share-float64(indexStep), "all of it but a step")
	_, err = r.Write(snap[len(snap)/2:])
	require.NoError(t, err)
	for pf.Index(r.Ready()) {
	}
	require.Equal(t, pf.tableBytes, pf.indexDone)
	got, err := r.Wheel()
	require.NoError(t, err)
	requireSameWheels(t, w, got, receiversOf(w))

	lie := rawSnapshot(7, 1<<22, rec(recEveryDelay, 1, 1, 5))
	r, pf = headerOnly(t, lie)
	require.NotNil(t, pf.table)
	require.False(t, pf.Index(r.Ready()))
	require.Zero(t, pf.indexDone, "4M timers claimed, none read: nothing")

	withParts(t, 12, 256)
	partShift = 30 // regions larger than the table: not partitioned
	r, err = NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write(snap)
	require.NoError(t, err)
	pf = r.Prefaulter()
	require.Nil(t, pf.table)
	require.False(t, pf.Index(r.Ready()))
}

// headerOnly returns a Restorer given snap's header a byte at a time, up
// to its Prefaulter (the header's end), and that Prefaulter.
func headerOnly(t *testing.T, snap []byte) (*Restorer, *Prefaulter) {
	t.Helper()
	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	for k := 0; r.Prefaulter() == nil; k++ {
		require.Less(t, k, len(snap))
		_, err = r.Write(snap[k : k+1])
		require.NoError(t, err)
	}
	return r, r.Prefaulter()
}

// TestPrefaulterBack: Back populates at once the regions of the first limit
// timers (a trusted bound, not the header's count) and their share of a
// partitioned index's table, and nothing more: a header that claims 2^26
// timers has three regions populated for a bound of 600,000; a bound above
// the count is held to the count; the work is shared by the workers.
func TestPrefaulterBack(t *testing.T) {
	withMapping(t, 4, mapMinEntries) // 8,192 nodes in the heap, then regions of 262,144
	if m := bigmem.Map(bigmem.HugePage); m == nil || !m.Populate(0, bigmem.HugePage) {
		t.Skip("the kernel cannot populate here (Linux 5.14+)")
	} else {
		m.Free()
	}
	lie := rawSnapshot(7, 1<<26, rec(recEveryDelay, 1, 1, 5))
	r, pf := headerOnly(t, lie)
	require.Greater(t, len(pf.regions), 200)
	pf.Back(600_000, 3)
	require.Equal(t, 3, pf.done, "the regions of 600,000 timers, not of the count's 2^26")
	if pf.table != nil {
		share := uint64(pf.tableBytes) * 600_000 / (1 << 26)
		require.Equal(t, uintptr(share), pf.indexDone)
	}
	pf.Upto(r.Ready())
	require.Equal(t, 3, pf.done, "a mark adds nothing past them")

	snap := rawSnapshot(7, 300_000, rec(recEveryDelay, 1, 1, 5))
	_, pf = headerOnly(t, snap)
	pf.Back(1<<30, 2)
	require.Equal(t, 2, pf.done, "a bound above the count: the count's regions (8,192 + 262,144 > 300,000)")
}
