package wheel

import (
	"math/rand/v2"
	"testing"
)

// TestIndexChurnDuringMoves adds and deletes at random around sizes that
// change every 2,000 operations (so the index grows over and over: random
// churn leaves too few tombstones for a rebuild at the same size, none in
// its 240 moves; TestIndexRebuildSpread and TestIndexMovesMapped make
// those on purpose), and looks every live key
// up after each operation while a move is going on: a look-up must find
// every key, whichever table holds it and wherever the move stands.
func TestIndexChurnDuringMoves(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		ih := newIndexHarness(t)
		x, live := &ih.x, ih.live
		rng := rand.New(rand.NewPCG(seed, 7))
		target := 0
		for op := 0; op < 20000; op++ {
			if op%2000 == 0 {
				target = 20 + int(rng.Uint64N(3000))
			}
			if len(ih.keys) == 0 || len(ih.keys) < target && rng.Uint64N(10) < 6 {
				if k := (Key{rng.Uint64N(8), rng.Uint64N(1 << 40)}); live[k] == 0 {
					ih.add(k, nil)
				}
			} else {
				ih.del(int(rng.Uint64N(uint64(len(ih.keys)))))
			}
			if x.moving() || op%97 == 0 {
				for k, i := range live {
					if _, got := x.lookup(k); got != i {
						t.Fatalf("seed %d op %d: lookup %v = %d, want %d (moving %v)", seed, op, k, got, i, x.moving())
					}
				}
			}
		}
	}
}
