package wheel

import (
	"math/bits"
	"testing"
)

// tagMatches counts the entries of k's probe run in the table (from its
// home to the first empty entry) whose tag is k's: the nodes a look-up of
// k reads when k is absent.
func tagMatches(x *index, k Key) int {
	h, im := hash(k), x.table.imask
	tg, n := tag(h, im), 0
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		e := *x.table.at(p)
		if e == 0 {
			return n
		}
		if e != tomb && e^tg <= im {
			n++
		}
	}
}

// TestIndexTagFiltersAbsentKeys: a look-up of a key that is not in an
// index 3/4 full (every add of a new timer makes one) reads the node of
// hardly any entry of its probe run (about 7 entries long): the entries'
// tags tell the key's from the others. With 4-bit tags a third of such
// look-ups read a node, a random one of the slab, a cache and TLB miss
// each (18% of the look-ups' time at 10M timers); the tag now takes every
// bit the node indices of the table leave.
func TestIndexTagFiltersAbsentKeys(t *testing.T) {
	ih := newIndexHarness(t)
	x := &ih.x
	const n = 190_000 // 72% of a table of 2^18 entries
	for i := range n {
		ih.add(Key{uint64(i % 1000), uint64(i)}, nil)
	}
	for x.moving() {
		x.migrate(migrateStep)
	}
	if got := x.table.len(); got != 1<<18 {
		t.Fatalf("table of %d entries, want 2^18", got)
	}
	const probes = 20_000
	reads := 0
	for i := range probes {
		k := Key{uint64(i % 1000), uint64(n + i)}
		reads += tagMatches(x, k)
		if _, j := x.lookup(k); j != 0 {
			t.Fatalf("absent key %v found as node %d", k, j)
		}
	}
	t.Logf("%d node reads in %d look-ups of absent keys, node index mask %#x", reads, probes, x.table.imask)
	if reads*20 > probes {
		t.Fatalf("%d node reads in %d look-ups of absent keys (node index mask %#x), want under 1 in 20", reads, probes, x.table.imask)
	}
	for k, i := range ih.live {
		if _, j := x.lookup(k); j != i {
			t.Fatalf("key %v found as node %d, want %d", k, j, i)
		}
	}
}

// TestIndexWiden: node indices that pass the table's mask (a slab whose
// high-water mark is far above what the index holds) narrow the tag in
// place, and every key stays found, through later moves too.
func TestIndexWiden(t *testing.T) {
	ih := newIndexHarness(t)
	x := &ih.x
	var held []uint32
	for range 5000 { // nodes that hold no key: the keys get indices above
		i, ok := ih.s.alloc()
		if !ok {
			t.Fatal("slab full")
		}
		ih.s.at(i).wprev = markFree // no key: a move's walk passes it
		held = append(held, i)
	}
	im := x.table.imask
	for i := range 3000 {
		ih.add(Key{7, uint64(i)}, nil)
		if i == 0 {
			if want := uint32(1)<<bits.Len32(held[len(held)-1]+1) - 1; x.table.imask <= im || x.table.imask != want {
				t.Fatalf("node index mask %#x after inserting node %d, was %#x, want %#x", x.table.imask, held[len(held)-1]+1, im, want)
			}
		}
		if i%100 == 99 { // a key of each hundred deleted: tombstones, rebuilds
			ih.del(i % len(ih.keys))
		}
		if i%500 == 0 {
			for k, j := range ih.live {
				if _, got := x.lookup(k); got != j {
					t.Fatalf("after %d adds: key %v found as node %d, want %d", i+1, k, got, j)
				}
			}
			if _, got := x.lookup(Key{8, uint64(i)}); got != 0 {
				t.Fatalf("absent key found as node %d", got)
			}
		}
	}
	for k, j := range ih.live {
		if _, got := x.lookup(k); got != j {
			t.Fatalf("key %v found as node %d, want %d", k, got, j)
		}
	}
	for _, i := range held {
		ih.s.release(i)
	}
}
