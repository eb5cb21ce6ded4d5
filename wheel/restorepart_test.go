package wheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// withParts has restores partition tables of 64 entries and more (mapped
// outside the heap, which partitioning needs) into regions of 2^shift
// entries, with buckets of slack entries past their share.
func withParts(t *testing.T, shift uint, slack uint64) {
	t.Helper()
	withMapping(t, 64, minIndexSize)
	oldShift, oldSlack := partShift, partSlack
	partShift, partSlack = shift, slack
	t.Cleanup(func() { partShift, partSlack = oldShift, oldSlack })
}

// tableEntries returns the live entries of w's index table, sorted.
func tableEntries(w *Wheel) []uint32 {
	var es []uint32
	for _, c := range w.index.table.c {
		for _, e := range c {
			if e != 0 && e != tomb {
				es = append(es, e)
			}
		}
	}
	slices.Sort(es)
	runtime.KeepAlive(w) // its table may be mapped: unmapped by a cleanup once w is unreachable
	return es
}

// TestRestorePartitioned: an index filled a region at a time
// (restorepart.go) answers every look-up as the wheel that was saved
// does: each key finds its timer, keys not saved are not found, and the
// table holds the same entries (tag and node) as one filled timer by
// timer, none missing, none twice. Over wheel sizes whose tables have 2
// to 8192 regions (or 1, the smallest with the largest regions: not
// partitioned), regions of 4 to 256 entries (probe runs cross their
// edges, and the table's end, often), buckets that overflow (slack 0) or
// not, and the regions filled in one part (Restore) or in 2 parts on two
// goroutines (restoreBuilding).
func TestRestorePartitioned(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	sizes := []int{40, 47, 48, 97, 1000, 3071, 3072, 3073, 20_000}
	snaps := make([][]byte, len(sizes))
	wheels := make([]*Wheel, len(sizes))
	refs := make([][]uint32, len(sizes))
	for k, n := range sizes {
		w := newWheel(t, 100, Config{})
		for i := range n {
			require.NoError(t, w.Add(Key{uint64(rng.IntN(n/10 + 1)), uint64(i)}, Spec{After: 1 + rng.Uint64N(5000)}))
		}
		wheels[k], snaps[k] = w, snapshotOf(t, w, 0)
		ref, err := Restore(Config{}, snaps[k]) // tables in the heap: filled timer by timer
		require.NoError(t, err)
		require.Nil(t, ref.index.table.mem)
		refs[k] = tableEntries(ref)
	}
	for _, shift := range []uint{2, 5, 8} {
		for _, slack := range []uint64{0, 256} {
			t.Run(fmt.Sprintf("shift=%d/slack=%d", shift, slack), func(t *testing.T) {
				withParts(t, shift, slack)
				for k, n := range sizes {
					for _, aside := range []bool{false, true} {
						var got *Wheel
						var err error
						if aside {
							got, err = restoreBuilding(Config{}, snaps[k], rng)
						} else {
							got, err = Restore(Config{}, snaps[k])
						}
						require.NoError(t, err, "n=%d", n)
						require.NotNil(t, got.index.table.mem, "n=%d: table not mapped", n)
						require.Equal(t, refs[k], tableEntries(got), "n=%d aside=%v", n, aside)
						require.Zero(t, got.index.tombs)
						requireSameWheels(t, wheels[k], got, receiversOf(wheels[k]))
						for range 200 { // keys not saved
							key := Key{rng.Uint64N(uint64(n/10 + 2)), uint64(n) + rng.Uint64N(1000)}
							_, err := got.Get(key)
							require.ErrorIs(t, err, ErrNotFound, "%v", key)
						}
					}
				}
			})
		}
	}
}

// TestRestorePartitionedDuplicate: two timers with one key are refused
// when the index is filled a region at a time, wherever the second is in
// the snapshot and whatever the regions and buckets, in one part or two.
func TestRestorePartitionedDuplicate(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	for _, shift := range []uint{2, 6} {
		for _, slack := range []uint64{0, 256} {
			withParts(t, shift, slack)
			for range 30 {
				n := 50 + rng.IntN(3000)
				keys := make([]Key, n)
				for i := range keys {
					keys[i] = Key{uint64(1 + i/7), uint64(i)}
				}
				a, b := rng.IntN(n), rng.IntN(n)
				if a == b {
					continue
				}
				keys[b] = keys[a]
				slices.SortStableFunc(keys, func(x, y Key) int { // records are by receiver
					return int(x.Receiver) - int(y.Receiver)
				})
				snap := rawSnapshot(7, n, keyRecords(keys)...)
				_, err := Restore(Config{}, snap)
				require.ErrorContains(t, err, "same key", "shift=%d slack=%d n=%d dup %v", shift, slack, n, keys[a])
				_, err = restoreBuilding(Config{}, snap, rng)
				require.ErrorContains(t, err, "same key", "shift=%d slack=%d n=%d dup %v", shift, slack, n, keys[a])
			}
		}
	}
}

// TestRestorePartStaysInside: filling one part writes the table only in
// its own regions (so that parts filled at the same time share nothing),
// even where probe runs cross its end; Wheel then fills the others and
// the entries the part left, and the wheel is the one saved.
func TestRestorePartStaysInside(t *testing.T) {
	withParts(t, 2, 256)
	w := newWheel(t, 100, Config{})
	for i := range 3000 {
		require.NoError(t, w.Add(Key{uint64(i % 37), uint64(i)}, Spec{After: 1 + uint64(i)%700}))
	}
	snap := snapshotOf(t, w, 0)
	spilled := 0
	for k := range 3 {
		r, err := NewRestorer(Config{})
		require.NoError(t, err)
		_, err = r.Write(snap)
		require.NoError(t, err)
		ib := r.IndexBuilder()
		require.True(t, ib.Add(r.Ready()))
		parts := ib.Parts(3)
		require.Len(t, parts, 3)
		p := parts[k]
		p.Fill()
		lo, hi := p.lo<<partShift, p.hi<<partShift
		flat := ib.pt.flat
		inside := 0
		for q, e := range flat {
			if uint64(q) < lo || uint64(q) >= hi {
				require.Zero(t, e, "part %d [%d, %d) wrote position %d", k, lo, hi, q)
			} else if e != 0 {
				inside++
			}
		}
		spilled += len(p.spill)
		require.Equal(t, uint64(inside+len(p.spill)), sumBuckets(ib.pt, p.lo, p.hi))
		got, err := r.Wheel()
		require.NoError(t, err)
		requireSameWheels(t, w, got, receiversOf(w))
	}
	require.NotZero(t, spilled, "no probe run crossed a part's end")
}

// sumBuckets returns the entries in the buckets of regions lo to hi.
func sumBuckets(pt *partition, lo, hi uint64) uint64 {
	s := uint64(0)
	for r := lo; r < hi; r++ {
		s += pt.n[r]
	}
	return s
}

// TestRestoreTidy: buckets inserted ahead by Tidy, whenever the builder
// has nothing else to do, leave the fill fewer entries, and the index and
// the wheel are the ones a fill of everything gives; a duplicate key is
// refused whether Tidy or the fill meets it.
func TestRestoreTidy(t *testing.T) {
	withParts(t, 8, 0) // buckets of ~82 entries: Tidy takes one of 20 or more
	rng := rand.New(rand.NewPCG(65, 66))
	w := newWheel(t, 100, Config{})
	for i := range 20_000 {
		require.NoError(t, w.Add(Key{uint64(rng.IntN(2000)), uint64(i)}, Spec{After: 1 + rng.Uint64N(5000)}))
	}
	snap := snapshotOf(t, w, 0)
	ref, err := Restore(Config{}, snap)
	require.NoError(t, err)
	restore := func(tidy bool) (*Wheel, uint64, error) {
		r, err := NewRestorer(Config{})
		require.NoError(t, err)
		var ib *IndexBuilder
		for p := snap; len(p) > 0; p = p[min(len(p), 512):] {
			_, err := r.Write(p[:min(len(p), 512)])
			require.NoError(t, err)
			if ib == nil {
				ib = r.IndexBuilder()
			}
			ib.Add(r.Ready())
			for tidy && ib.Tidy() {
			}
		}
		left := uint64(0)
		for _, n := range ib.pt.n {
			left += n
		}
		got, err := r.Wheel()
		return got, left, err
	}
	got, leftTidy, err := restore(true)
	require.NoError(t, err)
	require.Equal(t, tableEntries(ref), tableEntries(got))
	requireSameWheels(t, w, got, receiversOf(w))
	_, leftFill, err := restore(false)
	require.NoError(t, err)
	t.Logf("entries left for the fill: %d with Tidy, %d without", leftTidy, leftFill)
	require.Less(t, leftTidy, leftFill/2, "entries left for the fill")

	keys := []Key{{1, 1}, {1, 2}, {2, 1}, {1, 1}}
	dup := rawSnapshot(7, len(keys), keyRecords(keys)...)
	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write(dup)
	require.NoError(t, err)
	ib := r.IndexBuilder()
	ib.Add(r.Ready())
	for ib.Tidy() {
	}
	_, err = r.Wheel()
	require.ErrorContains(t, err, "same key")
}

// keyRecords returns version 2 records of one-shot timers of the keys, in
// their order, each due in 5 ticks, a receiver written only where it
// changes.
func keyRecords(keys []Key) [][]byte {
	var recs [][]byte
	for i, k := range keys {
		if i > 0 && k.Receiver == keys[i-1].Receiver {
			recs = append(recs, rec(recEveryDelay|recSameRecv, k.Tid, 5))
		} else {
			recs = append(recs, rec(recEveryDelay, k.Receiver, k.Tid, 5))
		}
	}
	return recs
}
