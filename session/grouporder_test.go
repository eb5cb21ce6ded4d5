package session

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel"
)

// checkOrder checks o's invariants against want, the sorted keys it must
// hold: blocks of 1 to orderBlock keys, sorted within and across blocks,
// mins the blocks' first keys, the count right.
func checkOrder(t *testing.T, o *groupOrder, want []wheel.Key, what string) {
	t.Helper()
	var got []wheel.Key
	require.Len(t, o.mins, len(o.blocks), what)
	for i, b := range o.blocks {
		require.NotEmpty(t, b, "%s: block %d", what, i)
		require.LessOrEqual(t, len(b), orderBlock, "%s: block %d", what, i)
		require.Equal(t, b[0], o.mins[i], "%s: min of block %d", what, i)
		got = append(got, b...)
	}
	require.True(t, slices.IsSortedFunc(got, keyCmp), what)
	require.Equal(t, len(want), o.count, what)
	require.True(t, slices.Equal(want, got), "%s: %d keys, want %d", what, len(got), len(want))
}

// TestGroupOrderModel inserts and removes random keys, in runs of
// ascending, descending and random order, and checks the order against a
// sorted slice: its invariants after every change, and pages from random
// keys (including absent ones and keys past the end) of random sizes.
func TestGroupOrderModel(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 24))
		model := map[wheel.Key]bool{}
		var o *groupOrder
		if seed%2 == 0 {
			o = newGroupOrder(nil)
		} else {
			var keys []wheel.Key
			for range 3000 {
				k := wheel.Key{Receiver: uint64(rng.IntN(4)), Tid: uint64(rng.IntN(5000))}
				if !model[k] {
					model[k] = true
					keys = append(keys, k)
				}
			}
			o = newGroupOrder(keys)
		}
		sorted := func() []wheel.Key {
			var ks []wheel.Key
			for k := range model {
				ks = append(ks, k)
			}
			slices.SortFunc(ks, keyCmp)
			return ks
		}
		for step := range 12000 {
			var k wheel.Key
			switch phase := step / 1500 % 4; phase {
			case 0: // ascending tids of one receiver
				k = wheel.Key{Receiver: 2, Tid: uint64(step)}
			case 1: // descending
				k = wheel.Key{Receiver: 1, Tid: uint64(20000 - step)}
			default:
				k = wheel.Key{Receiver: uint64(rng.IntN(4)), Tid: uint64(rng.IntN(5000))}
			}
			// Phase 3 (and some of the others) remove more than they add.
			if !model[k] && step/1500%4 == 3 && rng.IntN(3) > 0 {
				// Remove the key at or after k instead (or none past the end).
				if got, _ := o.from(k, 1, nil); len(got) == 1 {
					require.True(t, model[got[0]], "seed %d step %d: %v listed, not in", seed, step, got[0])
					k = got[0]
				}
			}
			if model[k] {
				require.True(t, o.remove(k), "seed %d step %d", seed, step)
				delete(model, k)
				require.False(t, o.remove(k), "seed %d step %d: removed twice", seed, step)
			} else {
				o.insert(k)
				model[k] = true
			}
			if step%97 != 0 && len(model) > 40 {
				continue
			}
			want := sorted()
			checkOrder(t, o, want, "after a change")
			for range 5 {
				from := wheel.Key{Receiver: uint64(rng.IntN(5)), Tid: uint64(rng.IntN(21000))}
				n := 1 + rng.IntN(1200)
				at, _ := slices.BinarySearchFunc(want, from, keyCmp)
				exp := want[at:min(len(want), at+n)]
				got, work := o.from(from, n, nil)
				require.Equal(t, append([]wheel.Key{}, exp...), append([]wheel.Key{}, got...), "seed %d step %d from %v n %d", seed, step, from, n)
				require.LessOrEqual(t, work, len(exp)+32, "a page's work is its keys and two binary searches")
			}
		}
		// Empty it: no block is left.
		for k := range model {
			require.True(t, o.remove(k))
		}
		checkOrder(t, o, nil, "emptied")
		require.Empty(t, o.blocks)
	}
}
