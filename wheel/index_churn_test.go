package wheel

import (
	"math/rand/v2"
	"testing"
)

// TestIndexChurnDuringMoves adds and deletes at random around sizes that
// change every 2,000 operations (so the index grows, and rebuilds at the
// same size to shed tombstones, over and over), and looks every live key
// up after each operation while a move is going on: a look-up must find
// every key, whichever table holds it and wherever the move stands.
func TestIndexChurnDuringMoves(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		var s slab
		s.init(4)
		var x index
		x.init(&s)
		rng := rand.New(rand.NewPCG(seed, 7))
		live := map[Key]uint32{}
		var keys []Key
		target := 50 + int(rng.Uint64N(3000))
		for op := 0; op < 20000; op++ {
			if op%2000 == 0 {
				target = 20 + int(rng.Uint64N(3000))
			}
			if len(keys) < target && rng.Uint64N(10) < 6 || len(keys) == 0 {
				k := Key{rng.Uint64N(8), rng.Uint64N(1 << 40)}
				if _, ok := live[k]; ok {
					continue
				}
				x.reserve()
				h := hash(k)
				pos, old := x.lookupHash(k, h)
				if old != 0 {
					t.Fatalf("seed %d op %d: add %v: already there", seed, op, k)
				}
				i, _ := s.alloc()
				n := s.at(i)
				n.receiver, n.tid, n.wprev = k.Receiver, k.Tid, 0
				x.insertAt(pos, h, i)
				live[k] = i
				keys = append(keys, k)
			} else {
				j := int(rng.Uint64N(uint64(len(keys))))
				k := keys[j]
				pos, i := x.lookup(k)
				if i != live[k] {
					t.Fatalf("seed %d op %d: delete %v: found %d, want %d (moving %v)", seed, op, k, i, live[k], x.moving())
				}
				x.deleteAt(pos)
				s.release(i)
				delete(live, k)
				keys[j] = keys[len(keys)-1]
				keys = keys[:len(keys)-1]
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
