package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFreeSetLowestFirst: take always returns the lowest free index, across
// all three bitmap levels (indices past 2^18 and 2^24), against a sorted
// slice as the model.
func TestFreeSetLowestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var f freeSet
	var model []uint32 // sorted
	free := map[uint32]bool{}
	for op := range 200_000 {
		if rng.IntN(2) == 0 || len(model) == 0 {
			var i uint32
			switch rng.IntN(3) {
			case 0:
				i = rng.Uint32N(1 << 12)
			case 1:
				i = rng.Uint32N(1 << 20)
			default:
				i = rng.Uint32N(1 << 26)
			}
			if free[i] {
				continue
			}
			free[i] = true
			f.add(i)
			p, _ := slices.BinarySearch(model, i)
			model = slices.Insert(model, p, i)
		} else {
			got, ok := f.take()
			if !ok || got != model[0] {
				t.Fatalf("op %d: take = %d, %v; want %d", op, got, ok, model[0])
			}
			delete(free, got)
			model = model[1:]
		}
		if int(f.n) != len(model) {
			t.Fatalf("op %d: n = %d, want %d", op, f.n, len(model))
		}
	}
	for len(model) > 0 {
		got, ok := f.take()
		if !ok || got != model[0] {
			t.Fatalf("draining: take = %d, %v; want %d", got, ok, model[0])
		}
		model = model[1:]
	}
	if _, ok := f.take(); ok {
		t.Fatal("take from an empty set succeeded")
	}
}
