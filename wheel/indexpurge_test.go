package wheel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndexPurgeKeepsTheTable: an index whose live entries fill 0.74 of
// its table (100M timers fill 0.745 of 2^27) and then churn (a random key
// deleted, a new one added, for ten times the table's size) keeps its
// table: no move, neither a doubling nor a rebuild beside it, because
// purges clear the tombstones in place. Meanwhile live entries and
// tombstones stay within 13/16, every key is found and no absent key is,
// the tombstone count is what the table holds, purges move entries (a
// probe run's entries after a tombstone are put back nearer their homes),
// and no insertion looks at more positions than its purge step and a
// probe run (at most a few hundred entries in a table of 2^14 this full).
func TestIndexPurgeKeepsTheTable(t *testing.T) {
	purgeSmall(t)
	ih := newIndexHarness(t)
	x := &ih.x
	const size = 1 << 14
	for i := uint64(0); len(ih.keys) < size*74/100; i++ {
		ih.add(Key{i % 7, i}, nil)
	}
	for x.moving() { // the last doubling, to 2^14, ends
		ih.add(Key{99, uint64(len(ih.keys))}, nil)
	}
	require.Equal(t, uint64(size), x.table.len())
	rng := rand.New(rand.NewPCG(3, 9))
	next := uint64(1 << 40)
	purges, moved, worst := 0, 0, uint64(0)
	ops := 10 * size
	if testing.Short() {
		ops = 4 * size
	}
	for op := range ops {
		ih.del(rng.IntN(len(ih.keys)))
		before, step := x.purgeLeft, x.purgeStep
		positions := map[uint32]uint64{} // node -> position, for the probe runs a step sweeps
		if before != 0 {
			for p := x.purgeAt; p < x.purgeAt+2*x.purgeStep; p++ {
				if e := *x.table.at(p & x.mask); e > tomb {
					positions[e&x.table.imask] = p & x.mask
				}
			}
		}
		nk := Key{rng.Uint64N(7), next}
		next++
		ih.add(nk, func() {
			require.False(t, x.moving(), "op %d: the index moves (table of %d)", op, x.table.len())
			if x.purgeLeft > before {
				purges++
			} else if before != 0 {
				worst = max(worst, before-x.purgeLeft-min(step, before-x.purgeLeft))
			}
			for i, p := range positions {
				if q, _ := x.lookup(Key{ih.s.get(i).receiver, ih.s.get(i).tid}); q != p {
					moved++
				}
			}
		})
		used := uint64(x.count + x.tombs)
		require.LessOrEqual(t, used*16, uint64(size)*13, "op %d: live entries and tombstones past 13/16", op)
		if op%997 == 0 {
			checkIndexEntries(t, ih)
		}
	}
	checkIndexEntries(t, ih)
	require.Equal(t, uint64(size), x.table.len(), "the table's size after the churn")
	require.Greater(t, purges, 5, "purge passes")
	require.Positive(t, moved, "entries a purge moved")
	require.LessOrEqual(t, worst, uint64(1024), "positions one insertion's purge looked at past its step")
	t.Logf("purges %d, entries moved %d, most positions an insertion looked at past its step %d (step %d)", purges, moved, worst, x.purgeStep)
}

// checkIndexEntries checks that the index holds exactly ih's live keys,
// each found as its node, that absent keys are not found, and that its
// tombstone count is what its table holds.
func checkIndexEntries(t *testing.T, ih *indexHarness) {
	t.Helper()
	x := &ih.x
	tombs := 0
	for _, e := range flat(&x.table) {
		if e == tomb {
			tombs++
		}
	}
	require.Equal(t, tombs, int(x.tombs), "tombstones counted")
	require.Equal(t, len(ih.live), liveEntries(flat(&x.table))+int(x.oldLive), "live entries")
	for k, i := range ih.live {
		if _, got := x.lookup(k); got != i {
			t.Fatalf("lookup %v: node %d, want %d", k, got, i)
		}
	}
	for j := range uint64(300) {
		if _, got := x.lookup(Key{j % 7, 1<<50 + j}); got != 0 {
			t.Fatalf("absent key %v found as node %d", Key{j % 7, 1<<50 + j}, got)
		}
	}
}

// purgeSmall has tables of any size purged (purgeMinEntries), for the
// test's duration: small tables are doubled by their tombstones otherwise.
func purgeSmall(t *testing.T) {
	old := purgeMinEntries
	purgeMinEntries = minIndexSize
	t.Cleanup(func() { purgeMinEntries = old })
}

// TestIndexAheadUnmappedWhenTheLiveFall: in a table that purges its
// tombstones, the table mapped ahead of a doubling (when the live entries
// came within 1/256 of 3/4) is freed once they have fallen 1/128 short of
// 3/4, and mapped again when they come back: only the live entries bring
// that doubling on, and the table backed ahead would otherwise stay for
// good (1 GiB at 100M timers).
func TestIndexAheadUnmappedWhenTheLiveFall(t *testing.T) {
	purgeSmall(t)
	g := aheadMapped(t)
	w, x := g.w, &g.w.index
	size := x.mask + 1
	a := w.IndexAhead()
	require.NotNil(t, a)
	require.Equal(t, int(2*size*4), a.Bytes(), "the doubled table mapped ahead")
	mapped := w.MappedBytes()
	for uint64(w.Len())+2*aheadOf(size) >= size*3/4 { // the live entries fall: cancels, then one add
		require.NoError(t, w.Cancel(Key{1, g.i - uint64(w.Len())}))
	}
	g.add(2)
	require.True(t, x.next == nil, "the table mapped ahead still held, live entries 1/128 short of 3/4")
	require.False(t, a.Populate(), "the table handed out was freed")
	require.Equal(t, mapped-int64(a.Bytes()), w.MappedBytes(), "the wheel's mapped bytes")
	g.until(func() bool { return x.next != nil }, func() { g.add(3) })
	require.Equal(t, size, x.mask+1, "no move meanwhile")
	require.NotNil(t, w.IndexAhead(), "mapped ahead again as the live entries came back")
	g.until(x.moving, func() { g.add(3) })
	require.Equal(t, 2*size, x.mask+1, "the doubling takes it")
	require.True(t, x.next == nil, "a table still mapped ahead after the move")
	checkIndexInvariants(t, w)
}

// TestIndexSweepFromMidRun: a purge step that starts inside a probe run (as
// one does when the insertion since the last step filled the empty entry
// before purgeAt), with a tombstone in the run before its start: the entry
// the sweep puts back lands in that tombstone. The index must stay exact.
//
// Run (all five keys hash to home h): K1 T K3 T K5 _ ; purgeRuns(h+2, 1)
// sweeps from h+3 (the first tombstone from h+2): K5 goes back to h+1.
func TestIndexSweepFromMidRun(t *testing.T) {
	ih := newIndexHarness(t)
	x := &ih.x
	const h = 20
	var ks []Key
	for i := uint64(0); len(ks) < 5; i++ {
		if k := (Key{3, i}); hash(k)&x.mask == h {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		ih.add(k, nil)
	}
	del := func(k Key) {
		for j, kk := range ih.keys {
			if kk == k {
				ih.del(j)
				return
			}
		}
	}
	del(ks[1])
	del(ks[3])
	checkIndexEntries(t, ih)
	x.purgeRuns(h+2, 1)
	checkIndexEntries(t, ih)
	require.Equal(t, uint32(0), *x.table.at(h + 4), "the run's end after the sweep")
	require.NotEqual(t, uint32(tomb), *x.table.at(h + 1), "K5 put back in the tombstone before the swept part")
}

// purgeFill returns a harness whose index has a table of size entries (mapped
// outside the heap), its move done, with live keys filling frac of it.
func purgeFill(t *testing.T, size uint64, frac float64) (*indexHarness, *rand.Rand, func() Key) {
	withMapping(t, heapBlocks, minIndexSize)
	ih := newIndexHarness(t)
	rng := rand.New(rand.NewPCG(21, 22))
	next := uint64(0)
	key := func() Key { next++; return Key{rng.Uint64N(7), next} }
	for float64(len(ih.keys)) < float64(size)*0.74 || ih.x.moving() {
		ih.add(key(), nil)
	}
	require.Equal(t, size, ih.x.table.len())
	for float64(len(ih.keys)) > float64(size)*frac {
		ih.del(rng.IntN(len(ih.keys)))
	}
	return ih, rng, key
}

// A churn of a purged table maps no doubled table ahead (the tombstones
// no longer lead to a move); the live entries nearing 3/4 do. An
// aheadLoad of live entries and tombstones would map (and the server back)
// the 1 GiB at 100M the purge saves.
func TestIndexPurgeMapsAheadByLiveOnly(t *testing.T) {
	purgeSmall(t)
	const size = 1 << 14
	ih, rng, key := purgeFill(t, size, 0.74)
	x := &ih.x
	for range 4 * size {
		ih.del(rng.IntN(len(ih.keys)))
		ih.add(key(), nil)
		require.True(t, x.next == nil, "a table mapped ahead at live %d, tombstones %d", x.count, x.tombs)
	}
	require.Equal(t, uint64(size), x.table.len())
	for uint64(x.count) < size*3/4-aheadOf(size) {
		ih.add(key(), nil)
	}
	ih.add(key(), nil)
	require.True(t, x.next != nil, "no table mapped ahead 1/256 short of 3/4 live")
	require.Equal(t, uint64(2*size), x.nextLen)
}

// A same-size rebuild (live entries at most 3/8) is mapped ahead by its
// tombstones; when the live entries then pass 3/8 and a purge starts
// instead, that table is freed (aheadLoad counts the tombstones below
// 3/8; startPurge frees it).
func TestIndexSameSizeAheadThenPurge(t *testing.T) {
	purgeSmall(t)
	const size = 1 << 14
	ih, rng, key := purgeFill(t, size, 0.372)
	x := &ih.x
	for x.next == nil && !x.moving() { // churn just under 3/8: tombstones
		ih.del(rng.IntN(len(ih.keys)))
		ih.add(key(), nil)
	}
	require.False(t, x.moving(), "the rebuild started without a table mapped ahead")
	require.Equal(t, uint64(size), x.nextLen, "the same-size table mapped ahead")
	for !x.moving() && x.purgeLeft == 0 { // adds only: the live entries pass 3/8
		ih.add(key(), nil)
	}
	require.NotZero(t, x.purgeLeft, "a move, not a purge (live %d)", x.count)
	require.True(t, x.next == nil, "the same-size table kept mapped while purging")
}
