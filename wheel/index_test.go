package wheel

import (
	"math/rand/v2"
	"testing"
)

// TestIndexChurn drives the index alone against a Go map through long runs
// of inserts and deletes (the firing of a burst, then refilling): every key
// is found where it should be, absent keys are not, and live entries plus
// tombstones never pass 3/4 of the table, so every probe run ends.
func TestIndexChurn(t *testing.T) {
	var s slab
	s.init(4) // 4 sentinels, as the smallest wheel has
	var x index
	x.init(&s)
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[Key]uint32{}
	var keys []Key
	add := func(k Key) {
		x.reserve()
		h := hash(k)
		pos, old := x.lookupHash(k, h)
		if old != 0 {
			t.Fatalf("add %v: already there as node %d", k, old)
		}
		i, ok := s.alloc()
		if !ok {
			t.Fatal("slab full")
		}
		n := s.at(i)
		n.receiver, n.tid, n.wprev = k.Receiver, k.Tid, 0
		x.insertAt(pos, h, i)
		live[k] = i
		keys = append(keys, k)
	}
	del := func(j int) {
		k := keys[j]
		pos, i := x.lookup(k)
		if i != live[k] {
			t.Fatalf("delete %v: found node %d, want %d", k, i, live[k])
		}
		x.deleteAt(pos)
		s.release(i)
		delete(live, k)
		keys[j] = keys[len(keys)-1]
		keys = keys[:len(keys)-1]
	}
	check := func(round int) {
		if int(x.count) != len(live) {
			t.Fatalf("round %d: count %d, want %d", round, x.count, len(live))
		}
		tombs, used := 0, 0
		for _, e := range x.table {
			if e == tomb {
				tombs++
			}
			if e != 0 {
				used++
			}
		}
		if tombs != int(x.tombs) {
			t.Fatalf("round %d: %d tombstones, counted %d", round, tombs, x.tombs)
		}
		if used*4 > len(x.table)*3 {
			t.Fatalf("round %d: %d of %d entries used, above 3/4", round, used, len(x.table))
		}
		for k, i := range live {
			if _, got := x.lookup(k); got != i {
				t.Fatalf("round %d: lookup %v = %d, want %d", round, k, got, i)
			}
		}
		for range 200 {
			k := Key{rng.Uint64N(64), rng.Uint64()}
			if _, ok := live[k]; !ok {
				if _, got := x.lookup(k); got != 0 {
					t.Fatalf("round %d: absent %v found as %d", round, k, got)
				}
			}
		}
	}
	for round := range 60 {
		// Fill to a random size, then delete most of it in random order,
		// with a few re-adds of deleted keys in between.
		for target := rng.IntN(3000); len(keys) < target; {
			add(Key{rng.Uint64N(64), rng.Uint64()})
		}
		check(round)
		for n := len(keys) * (50 + rng.IntN(50)) / 100; n > 0; n-- {
			j := rng.IntN(len(keys))
			k := keys[j]
			del(j)
			if rng.IntN(10) == 0 {
				add(k)
			}
		}
		check(round)
	}
	if len(x.table) > 8192 {
		t.Errorf("the table grew to %d entries for at most ~3000 live keys: tombstones should be rebuilt away, not grown past", len(x.table))
	}
}
