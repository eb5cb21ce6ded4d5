package wheel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireRecvLinks fails t unless every receiver list of w is linked both
// ways, newest first by seq, and as long as its count.
func requireRecvLinks(t testing.TB, w *Wheel) {
	t.Helper()
	for _, e := range w.recv.table {
		if e.count == 0 {
			continue
		}
		prev, k := nilIdx, uint32(0)
		for i := e.head; i != nilIdx; i = w.nodes.get(i).rnext {
			n := w.nodes.get(i)
			require.Equal(t, e.key, n.receiver, "node %d in receiver %d's list", i, e.key)
			require.Equal(t, prev, n.rprev, "node %d's rprev", i)
			if prev != nilIdx {
				require.Less(t, n.order(), w.nodes.get(prev).order(), "receiver %d's list out of add order", e.key)
			}
			prev, k = i, k+1
			require.LessOrEqual(t, k, e.count, "receiver %d's list longer than its count", e.key)
		}
		require.Equal(t, e.count, k, "receiver %d's list length", e.key)
	}
}

// restoreCounting restores snap and returns the wheel and how many
// receivers' lists the Restorer had to sort after the records.
func restoreCounting(t testing.TB, snap []byte) (*Wheel, int) {
	t.Helper()
	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	for p := snap; len(p) > 0; p = p[min(len(p), 4096):] {
		_, err := r.Write(p[:min(len(p), 4096)])
		require.NoError(t, err)
	}
	w, err := r.Wheel()
	require.NoError(t, err)
	return w, r.resorted
}

// TestRestoreWrittenWhileAddingLinksInPlace: a snapshot encoded while the
// wheel takes adds between its pieces (each add's first write to its
// receiver's newest node has the write barrier save it, and the encoder
// writes it ahead of its place in slab order) restores to the state of the
// stopped-world snapshot, every receiver's list linked in add order as the
// records come, none left to sort afterwards: sorting them all after the
// records cost a restore 1.4-3x its time (BenchmarkRestoreWrittenWhileAdding).
// A churned wheel (freed nodes reused, slab order far from add order) still
// restores its lists sorted.
func TestRestoreWrittenWhileAddingLinksInPlace(t *testing.T) {
	for _, churn := range []bool{false, true} {
		t.Run(fmt.Sprint("churn=", churn), func(t *testing.T) {
			w := snapWheel(t, 20_000, churn)
			want := snapshotOf(t, w, 0)
			f := w.Freeze()
			var snap []byte
			next := 1_000_000
			for done := false; !done; {
				snap, done = f.AppendNext(snap, 2<<10)
				for range 7 {
					require.NoError(t, w.Add(Key{uint64(next % 1000), uint64(next)}, Spec{After: 1 + uint64(next%60_480_000)}))
					next++
				}
			}
			f.Release()
			got, resorted := restoreCounting(t, snap)
			requireRecvLinks(t, got)
			requireSameState(t, want, snapshotOf(t, got, 0), "the restored wheel is not the state at the Freeze")
			if !churn {
				require.Zero(t, resorted, "receivers' lists sorted after the records")
			}
			// The lists linked by the builder on another goroutine (-race).
			aside, err := restoreBuilding(Config{}, snap, rand.New(rand.NewPCG(uint64(len(snap)), 3)))
			require.NoError(t, err)
			requireRecvLinks(t, aside)
			requireSameState(t, want, snapshotOf(t, aside, 0), "the wheel restored with the builder aside")
		})
	}
}

// TestRestoreRecvOutOfOrder: records of one receiver in any order restore
// to its list in add order, whether they go in after a few newer timers
// (at most recvWalkMax passed) or the list is sorted afterwards; a seq
// repeated within a receiver is an error however far down the list.
func TestRestoreRecvOutOfOrder(t *testing.T) {
	// Receiver 5, tids 1..n with seqs given in record order.
	snap := func(seqs ...int64) []byte {
		var recs [][]byte
		prev := int64(0)
		for j, s := range seqs {
			fl := byte(recEveryDelay)
			if j == 0 {
				fl |= recFirst
				recs = append(recs, rec(fl, 5, uint64(j+1), zz(s), 10))
			} else {
				recs = append(recs, rec(fl|recSameRecv, uint64(j+1), zz(s-prev), 10))
			}
			prev = s
		}
		return rawSnapshotV(4, 100, len(seqs), recs...)
	}
	for _, seqs := range [][]int64{
		{1, 2, 3, 4},
		{9, 1, 2, 3},    // the newest first: the rest go in after it
		{9, 8, 1, 2, 3}, // two newer ones passed
		{20, 19, 18, 17, 16, 15, 14, 13, 12, 1, 2}, // nine newer: sorted afterwards
		{5, 1, 9, 2, 7, 3},
	} {
		w, err := Restore(Config{}, snap(seqs...))
		require.NoError(t, err, "seqs %v", seqs)
		requireRecvLinks(t, w)
		var tids []uint64
		for _, in := range w.List(5, nil) {
			tids = append(tids, in.Tid)
		}
		require.Len(t, tids, len(seqs))
		for j := 1; j < len(tids); j++ { // List is oldest first
			require.Less(t, seqs[tids[j-1]-1], seqs[tids[j]-1], "seqs %v: List %v", seqs, tids)
		}
	}
	for _, seqs := range [][]int64{{3, 3}, {9, 3, 3}, {9, 8, 3, 8}, {9, 1, 2, 9}} {
		w, err := Restore(Config{}, snap(seqs...))
		require.Nil(t, w, "seqs %v", seqs)
		require.ErrorIs(t, err, ErrSnapshot, "seqs %v", seqs)
	}
}

// TestRadixSortSeq: radixSortSeq orders entries seq<<32|node by seq as
// slices.Sort does (distinct seqs), and keeps the order of entries of one
// seq; a sortDistinctBuf of a long slice with a repeated seq fails.
func TestRadixSortSeq(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 300, 5000} {
		for _, span := range []uint32{1 << 31, 1 << 20, 3000 + uint32(n)} {
			seqs := map[uint32]bool{}
			var a []uint64
			for len(a) < n {
				s := rng.Uint32N(span)
				if !seqs[s] {
					seqs[s] = true
					a = append(a, uint64(s)<<32|uint64(rng.Uint32N(1<<28)))
				}
			}
			want := slices.Clone(a)
			slices.Sort(want)
			radixSortSeq(a, make([]uint64, len(a)))
			require.Equal(t, want, a, "n %d span %d", n, span)
		}
	}
	a := []uint64{7<<32 | 3, 5<<32 | 9, 7<<32 | 1, 5<<32 | 2}
	radixSortSeq(a, make([]uint64, len(a)))
	require.Equal(t, []uint64{5<<32 | 9, 5<<32 | 2, 7<<32 | 3, 7<<32 | 1}, a, "stable")
	long := make([]uint64, 1000)
	for j := range long {
		long[j] = uint64(j)<<32 | uint64(j)
	}
	long[500] = 20<<32 | 500
	var scratch []uint64
	require.ErrorIs(t, sortDistinctBuf(long, &scratch, "receiver"), ErrSnapshot)
}

// TestRestoreChurnedLongLists: a wheel whose freed nodes were reused has
// its receivers' lists far out of slab order; lists longer than radixMin
// are sorted by radixSortSeq after the records, and restore to the same
// state, linked both ways in add order.
func TestRestoreChurnedLongLists(t *testing.T) {
	w := newWheel(t, 0, Config{})
	rng := rand.New(rand.NewPCG(8, 9))
	for i := range uint64(20_000) {
		require.NoError(t, w.Add(Key{i % 7, i}, Spec{After: 1 + rng.Uint64N(1_000_000)}))
	}
	for i := uint64(0); i < 20_000; i += 2 {
		require.NoError(t, w.Cancel(Key{i % 7, i}))
	}
	for i := uint64(20_000); w.Len() < 20_000; i++ {
		require.NoError(t, w.Add(Key{i % 7, i}, Spec{After: 1 + rng.Uint64N(1_000_000)}))
	}
	snap := snapshotOf(t, w, 0)
	got, resorted := restoreCounting(t, snap)
	require.Equal(t, 7, resorted, "every receiver's list sorted after the records")
	requireRecvLinks(t, got)
	requireSameWheels(t, w, got, []uint64{0, 1, 2, 3, 4, 5, 6})
}
