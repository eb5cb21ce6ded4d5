package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFreeSetLowestFirst: take returns the index added last if it is still
// free, else the lowest free index, across all three bitmap levels (indices
// past 2^18 and 2^24), against a sorted slice as the model.
func TestFreeSetLowestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var f freeSet
	f.grow(1 << 26)
	var model []uint32 // sorted, the hot index excluded
	hot, hasHot := uint32(0), false
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
			if hasHot {
				p, _ := slices.BinarySearch(model, hot)
				model = slices.Insert(model, p, hot)
			}
			hot, hasHot = i, true
		} else {
			want := hot
			if hasHot {
				hasHot = false
			} else {
				want, model = model[0], model[1:]
			}
			got, ok := f.take()
			if !ok || got != want {
				t.Fatalf("op %d: take = %d, %v; want %d", op, got, ok, want)
			}
			delete(free, got)
		}
		if int(f.n) != len(model) {
			t.Fatalf("op %d: n = %d, want %d", op, f.n, len(model))
		}
	}
	if hasHot {
		if got, ok := f.take(); !ok || got != hot {
			t.Fatalf("draining: take = %d, %v; want the hot %d", got, ok, hot)
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
