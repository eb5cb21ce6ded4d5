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
	r, err = NewRestorer(Config{})
	require.NoError(t, err)
	for k := 0; r.Prefaulter() == nil; k++ { // the header, a byte at a time
		require.Less(t, k, len(lie))
		_, err = r.Write(lie[k : k+1])
		require.NoError(t, err)
	}
	pf = r.Prefaulter()
	require.Greater(t, len(pf.regions), 200, "the count's regions are mapped")
	pf.Upto(r.Ready())
	require.Equal(t, 2, pf.done, "but only two are populated")
}
