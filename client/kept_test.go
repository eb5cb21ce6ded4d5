package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeptRing: keeping, trimming and finding across growth, wrap-around,
// shrinking, a jump in seqs and the maxKept bound, against a map.
func TestKeptRing(t *testing.T) {
	var k keptRing
	model := map[uint64]uint64{} // seq -> fingerprint
	lo, seq := uint64(1), uint64(0)
	check := func() {
		t.Helper()
		require.Equal(t, int(seq-lo+1), k.n)
		for s := lo; s <= seq; s += 97 {
			fp, ok := k.find(s)
			require.True(t, ok, "seq %d", s)
			require.Equal(t, model[s], fp)
		}
		_, ok := k.find(lo - 1)
		require.False(t, ok)
		_, ok = k.find(seq + 1)
		require.False(t, ok)
	}
	for round := range 30 {
		if round == 17 { // a jump forward: everything before is forgotten
			seq += 1000
			lo = seq + 1
		}
		for range (round*7919)%(3*maxKept/2) + 1 {
			seq++
			model[seq] = fingerprint(seq, 2*seq, 1)
			k.push(seq, model[seq])
			if seq-lo+1 > maxKept {
				lo = seq - maxKept + 1
			}
		}
		check()
		cut := lo + (seq-lo)*uint64(round%4)/4
		k.trim(cut)
		lo = max(lo, cut+1)
		if lo > seq {
			require.Zero(t, k.n)
			lo = seq + 1
			continue
		}
		check()
	}
	k.trim(seq)
	require.Zero(t, k.n)
	require.Nil(t, k.fp, "an empty ring keeps no memory")
	require.NotEqual(t, fingerprint(1, 2, 3), fingerprint(1, 2, 4))
}
