package wheel

import (
	"math/rand/v2"
	"runtime/metrics"
	"strconv"
	"testing"
)

// TestIndexChurn drives the index alone against a Go map through long runs
// of inserts and deletes (the firing of a burst, then refilling): every key
// is found where it should be, absent keys are not, and live entries plus
// tombstones never pass 3/4 of the table (13/16 while the live ones are
// within 3/4 and tombstones are purged in place), so every probe run ends; no
// insertion moves more than migrateStep entries to the new table (all of
// them, before).
func TestIndexChurn(t *testing.T) {
	purgeSmall(t)
	ih := newIndexHarness(t)
	x, live := &ih.x, ih.live
	rng := rand.New(rand.NewPCG(1, 2))
	worst := 0
	add := func(k Key) {
		inTable, first := x.count-x.oldLive, x.table.at(0)
		ih.add(k, func() {
			if x.table.at(0) != first {
				inTable = 0
			}
			worst = max(worst, int(x.count-x.oldLive-inTable))
		})
	}
	del := ih.del
	check := func(round int) {
		if int(x.count) != len(live) {
			t.Fatalf("round %d: count %d, want %d", round, x.count, len(live))
		}
		tombs, used := 0, 0
		for _, e := range flat(&x.table) {
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
		if used*4 > int(x.table.len())*3 && (used*16 > int(x.table.len())*13 || len(live)*4 > int(x.table.len())*3) {
			t.Fatalf("round %d: %d of %d entries used (%d live), above 3/4 (13/16 purging)", round, used, int(x.table.len()), len(live))
		}
		oldLive := 0
		for _, e := range flat(&x.old) {
			if e != 0 && e != tomb && e&x.old.imask >= x.cursor { // below cursor: stale, moved
				if x.isFresh(e & x.old.imask) {
					t.Fatalf("round %d: the old table holds an entry of fresh node %d", round, e&x.old.imask)
				}
				oldLive++
			}
		}
		if oldLive != int(x.oldLive) {
			t.Fatalf("round %d: %d live entries in the old table, counted %d", round, oldLive, x.oldLive)
		}
		if inTable := liveEntries(flat(&x.table)); inTable+oldLive != len(live) {
			t.Fatalf("round %d: %d entries in the table and %d in the old one for %d keys", round, inTable, oldLive, len(live))
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
	moves, purging := 0, 0
	for round := range 60 {
		// Fill to a random size, then delete most of it in random order,
		// with a few re-adds of deleted keys in between.
		// Some checks land between the steps of a move or of a purge.
		for target := rng.IntN(3000); len(ih.keys) < target; {
			add(Key{rng.Uint64N(64), rng.Uint64()})
			if (x.moving() || x.purgeLeft != 0) && rng.IntN(64) == 0 {
				check(round)
				if x.moving() {
					moves++
				} else {
					purging++
				}
			}
		}
		check(round)
		for n := len(ih.keys) * (50 + rng.IntN(50)) / 100; n > 0; n-- {
			j := rng.IntN(len(ih.keys))
			k := ih.keys[j]
			del(j)
			if rng.IntN(10) == 0 {
				add(k)
			}
		}
		check(round)
	}
	if moves == 0 {
		t.Error("no check ran while the index was moving to a new table")
	}
	if purging == 0 {
		t.Error("no check ran while a purge of tombstones was going on")
	}
	if worst > maxMoved {
		t.Errorf("one insertion moved %d entries to the new table, want at most %d", worst, maxMoved)
	}
	if int(x.table.len()) > 8192 {
		t.Errorf("the table grew to %d entries for at most ~3000 live keys: tombstones should be rebuilt away, not grown past", int(x.table.len()))
	}
}

// maxMoved is how many entries one insertion may move to a new table
// (migrateStep); before, the insertion that passed 3/4 moved all of them.
const maxMoved = 4

// flat returns a copy of the entries of t, in order.
func flat(t *itable) []uint32 {
	var out []uint32
	for _, c := range t.c {
		out = append(out, c...)
	}
	return out
}

// liveEntries counts the entries of t that are neither empty nor tombstones.
func liveEntries(t []uint32) int {
	n := 0
	for _, e := range t {
		if e != 0 && e != tomb {
			n++
		}
	}
	return n
}

// TestIndexGrowthSpread: a wheel whose index doubles several times, then
// churns (rounds of cancels, adds and firings), never moves more than migrateStep
// entries into the index's table in one Add, and none in an Advance or a
// Cancel; every timer stays found. Before, the Add that passed 3/4 rehashed
// every entry in one call (733 ms at 10M timers, in one loop turn).
func TestIndexGrowthSpread(t *testing.T) {
	w := newWheel(t, 0, Config{})
	x := &w.index
	rng := rand.New(rand.NewPCG(3, 4))
	live := map[Key]bool{}
	var keys []Key
	// moved returns the entries op moved into the table: what it holds
	// after, less what it held before (nothing when op started a new
	// table) and the insertions op made.
	moved := func(op func(), inserted int) int {
		before, first := liveEntries(flat(&x.table)), x.table.at(0)
		op()
		if x.table.at(0) != first {
			before = 0
		}
		return liveEntries(flat(&x.table)) - before - inserted
	}
	worst, grown := 0, 0
	tid := uint64(0)
	add := func(after uint64) {
		tid++
		k := Key{tid % 97, tid}
		size, first := int(x.table.len()), x.table.at(0)
		if m := moved(func() {
			if err := w.Add(k, Spec{After: after, Repeat: 1}); err != nil {
				t.Fatal(err)
			}
		}, 1); m > worst {
			worst = m
		}
		if x.table.at(0) != first && int(x.table.len()) > size {
			grown++
		}
		live[k] = true
		keys = append(keys, k)
	}
	cancel := func(j int) {
		if m := moved(func() { _ = w.Cancel(keys[j]) }, 0); m > 0 {
			t.Fatalf("a Cancel moved %d entries into the table", m)
		}
		delete(live, keys[j])
		keys[j] = keys[len(keys)-1]
		keys = keys[:len(keys)-1]
	}
	check := func() {
		for k := range live {
			if _, err := w.Get(k); err != nil {
				t.Fatalf("%v (added, not fired or cancelled): %v", k, err)
			}
		}
		if w.Len() != len(live) {
			t.Fatalf("Len %d, want %d", w.Len(), len(live))
		}
	}
	// Grow to 3000 timers (a table of 4096 entries), checking midway
	// through each move as well.
	for range 3000 {
		add(1_000_000)
		if x.moving() && x.cursor-x.nodes.nsent < (x.end-x.nodes.nsent)/2 && tid%7 == 0 {
			check()
		}
	}
	// Rounds of cancelling most timers and adding back up to 1500, some
	// of which fire on the way (TestIndexChurn rebuilds at the same size).
	for range 12 {
		for len(keys) > 300 {
			cancel(rng.IntN(len(keys)))
		}
		for i := 0; len(live) < 1500; i++ {
			add(1 + rng.Uint64N(2000))
			if i%10 == 9 {
				if m := moved(func() {
					w.Advance(w.Now()+1, 0, func(f *Fire) { delete(live, f.Key) })
				}, 0); m > 0 {
					t.Fatalf("an Advance moved %d entries into the table", m)
				}
			}
			if x.moving() && i%37 == 0 {
				check()
			}
		}
		check()
	}
	check()
	if worst > maxMoved {
		t.Errorf("one Add moved %d entries into the index, want at most %d", worst, maxMoved)
	}
	if grown < 5 {
		t.Errorf("the index grew %d times: want several", grown)
	}
	t.Logf("%d timers live, index of %d entries, grown %d times, at most %d entries moved by one Add", len(live), int(x.table.len()), grown, worst)
}

// TestIndexRebuildSpread: an index whose tombstones fill it is rebuilt at
// the same size, a few entries per insertion, with every key found while
// it moves. The tombstones are made on purpose: a table filled to 3/4
// loses every entry but the last of each probe run (each deletion's next
// entry is still there, so each leaves a tombstone), then takes keys that
// land on empty entries until the next insertion must rebuild.
func TestIndexRebuildSpread(t *testing.T) {
	var s slab
	s.init(4)
	var x index
	x.init(&s)
	for int(x.table.len()) < 1024 || x.count < 767 {
		k := Key{1, uint64(x.count) + 1}
		x.reserve()
		pos, _ := x.lookup(k)
		i, _ := s.alloc()
		n := s.at(i)
		n.receiver, n.tid, n.wprev = k.Receiver, k.Tid, 0
		x.insertAt(pos, hash(k), i)
	}
	for x.moving() { // finish the last doubling
		x.reserve()
	}
	if int(x.table.len()) != 1024 {
		t.Fatalf("table of %d entries, want 1024", int(x.table.len()))
	}
	for p := range x.table.len() {
		if e := *x.table.at(p); e != 0 && e != tomb && *x.table.at((p + 1) & x.mask) != 0 {
			x.deleteAt(uint64(p))
			s.release(e & x.table.imask)
		}
	}
	if x.tombs < 384 {
		t.Fatalf("%d tombstones, want at least 3/8 of the table", x.tombs)
	}
	live := map[Key]uint32{}
	for i := s.nsent; i < s.n; i++ {
		if n := s.get(i); n.wprev != markFree {
			live[Key{n.receiver, n.tid}] = i
		}
	}
	first, worst := x.table.at(0), 0
	for tid := uint64(1 << 40); !x.moving() && x.table.at(0) == first; tid++ {
		k := Key{2, tid}
		if pos, _ := x.lookup(k); *x.table.at(pos) == tomb && x.count+x.tombs+1 <= 768 {
			continue // it would reuse a tombstone: take keys that add one
		}
		inTable := x.count
		x.reserve()
		if x.table.at(0) != first {
			inTable = 0
		}
		worst = max(worst, int(x.count-x.oldLive-inTable))
		pos, _ := x.lookup(k)
		i, _ := s.alloc()
		n := s.at(i)
		n.receiver, n.tid, n.wprev = k.Receiver, k.Tid, 0
		x.insertAt(pos, hash(k), i)
		live[k] = i
	}
	if int(x.table.len()) != 1024 {
		t.Fatalf("rebuilt at %d entries, want the same size (1024) for %d live", int(x.table.len()), x.count)
	}
	for x.moving() {
		for k, i := range live {
			if _, got := x.lookup(k); got != i {
				t.Fatalf("while moving: %v found as %d, want %d", k, got, i)
			}
		}
		inTable := x.count - x.oldLive
		x.reserve()
		worst = max(worst, int(x.count-x.oldLive-inTable))
	}
	if x.tombs != 0 || int(x.count) != len(live) || liveEntries(flat(&x.table)) != len(live) {
		t.Errorf("after the rebuild: %d tombstones, count %d, %d entries, want 0, %d, %d", x.tombs, x.count, liveEntries(flat(&x.table)), len(live), len(live))
	}
	if worst > maxMoved {
		t.Errorf("one insertion moved %d entries, want at most %d", worst, maxMoved)
	}
}

// TestIndexBuildSize: a restored wheel's index is the smallest table that
// holds its timers within 3/4, as a wheel that grew to them has (it was
// twice that: 1 GiB at 100M timers, 10.7 bytes a timer where 5.4 do), and
// the wheel grows on from there, each timer found.
func TestIndexBuildSize(t *testing.T) {
	for _, n := range []int{40, 48, 49, 3000, 3072, 3073, 20_000} {
		w := newWheel(t, 0, Config{})
		for i := range n {
			if err := w.Add(Key{uint64(i % 7), uint64(i)}, Spec{After: 1 + uint64(i%500)}); err != nil {
				t.Fatal(err)
			}
		}
		var snap []byte
		f := w.Freeze()
		for done := false; !done; {
			snap, done = f.AppendNext(snap, 1<<16)
		}
		f.Release()
		r, err := Restore(Config{}, snap)
		if err != nil {
			t.Fatal(err)
		}
		size := int(r.index.table.len())
		if n*4 > size*3 || size > minIndexSize && n*4 <= size/2*3 {
			t.Errorf("%d timers restored into an index of %d entries: want the smallest power of two (at least %d) that holds them within 3/4", n, size, minIndexSize)
		}
		for i := n; i < n+n/2+100; i++ {
			if err := r.Add(Key{uint64(i % 7), uint64(i)}, Spec{After: 1 + uint64(i%500)}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n + n/2 + 100 {
			if _, err := r.Get(Key{uint64(i % 7), uint64(i)}); err != nil {
				t.Fatalf("n=%d: timer %d: %v", n, i, err)
			}
		}
	}
}

// TestIndexGrowsOutsideTheHeap: a wheel whose index doubles past one chunk
// (2^19 to 2^20 entries, 4 MiB; mapMinEntries set to 2^20 here) allocates
// no more than a chunk (1 MiB) of Go heap in any one Add: the new table is
// mapped outside the heap (a make
// of the whole new table in one Add zeroed 512 MiB in one turn at 100M
// timers), and every timer is still found after. Where nothing can be
// mapped outside the heap the table is made in it, at once.
func TestIndexGrowsOutsideTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("adds 600k timers")
	}
	withMapping(t, heapBlocks, 1<<20)
	w := newWheel(t, 0, Config{})
	x := &w.index
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var tid, worst uint64
	add := func() {
		tid++
		before := allocated()
		if err := w.Add(Key{tid % 1000, tid}, Spec{After: 1_000_000}); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, allocated()-before)
	}
	for x.table.len() < 1<<19 || x.count < 1<<19*5/8-1000 { // unmeasured: the slab's and smaller tables' growth
		tid++
		if err := w.Add(Key{tid % 1000, tid}, Spec{After: 1_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	for x.table.len() < 1<<20 || x.moving() {
		add()
	}
	if worst > chunkLen*4*3/2 {
		t.Errorf("an Add allocated %d bytes while the index doubled to %d entries, want at most about a chunk (%d)", worst, x.table.len(), chunkLen*4)
	}
	for i := uint64(1); i <= tid; i += 997 {
		if x.find(Key{i % 1000, i}) == 0 {
			t.Fatalf("timer %d not found after the move", i)
		}
	}
	t.Logf("%d timers, index of %d entries in %d chunks, at most %d bytes allocated by one Add", tid, x.table.len(), len(x.table.c), worst)
}

// TestIndexLookupWhileMoving checks every key after each insertion of a move
// to a new table, and after deletions from the old one: a key of a node the
// walk has not reached is found in the old table, past the stale entries of
// the nodes it has; a key whose node it has, in the table; absent keys
// nowhere. The old table is filled to 3/4 first, where probe runs are
// longest.
func TestIndexLookupWhileMoving(t *testing.T) {
	ih := newIndexHarness(t)
	x, live := &ih.x, ih.live
	rng := rand.New(rand.NewPCG(3, 4))
	add := func() { ih.add(Key{rng.Uint64N(8), rng.Uint64()}, nil) }
	check := func(when string) {
		for k, i := range live {
			if _, got := x.lookup(k); got != i {
				t.Fatalf("%s: lookup %v = %d, want %d (walked to %d of %d)", when, k, got, i, x.cursor, x.end)
			}
		}
		for range 300 {
			if k := (Key{rng.Uint64N(8), rng.Uint64()}); live[k] == 0 {
				if _, got := x.lookup(k); got != 0 {
					t.Fatalf("%s: absent %v found as %d", when, k, got)
				}
			}
		}
	}
	moves := 0
	for round := range 6 {
		for !x.moving() {
			add()
		}
		moves++
		for step := 0; x.moving(); step++ {
			check("round " + strconv.Itoa(round) + " step " + strconv.Itoa(step))
			if step%8 == 7 { // delete a key, in the old table or the new
				ih.del(rng.IntN(len(ih.keys)))
			}
			add()
		}
		check("round " + strconv.Itoa(round) + " end")
	}
	if moves != 6 {
		t.Fatalf("%d moves, want 6", moves)
	}
}

// indexHarness is an index over a slab of its own, and a Go map of what
// it must hold, for the index tests.
type indexHarness struct {
	t    *testing.T
	s    slab
	x    index
	live map[Key]uint32
	keys []Key
}

func newIndexHarness(t *testing.T) *indexHarness {
	ih := &indexHarness{t: t, live: map[Key]uint32{}}
	ih.s.init(4) // 4 sentinels, as the smallest wheel has
	ih.x.init(&ih.s)
	return ih
}

// add inserts k, which must be absent, as a wheel's Add does: reserve
// (then afterReserve, when not nil), look up, insert.
func (ih *indexHarness) add(k Key, afterReserve func()) {
	ih.t.Helper()
	ih.x.reserve()
	if afterReserve != nil {
		afterReserve()
	}
	h := hash(k)
	pos, old := ih.x.lookupHash(k, h)
	if old != 0 {
		ih.t.Fatalf("add %v: already there as node %d", k, old)
	}
	i, ok := ih.s.alloc()
	if !ok {
		ih.t.Fatal("slab full")
	}
	n := ih.s.at(i)
	n.receiver, n.tid, n.wprev = k.Receiver, k.Tid, 0
	ih.x.insertAt(pos, h, i)
	ih.x.noteNew(i)
	ih.live[k] = i
	ih.keys = append(ih.keys, k)
}

// del deletes keys[j], which the look-up must find as its node.
func (ih *indexHarness) del(j int) {
	ih.t.Helper()
	k := ih.keys[j]
	pos, i := ih.x.lookup(k)
	if i != ih.live[k] {
		ih.t.Fatalf("delete %v: found node %d, want %d (moving %v)", k, i, ih.live[k], ih.x.moving())
	}
	ih.x.deleteAt(pos)
	ih.s.release(i)
	delete(ih.live, k)
	ih.keys[j] = ih.keys[len(ih.keys)-1]
	ih.keys = ih.keys[:len(ih.keys)-1]
}

// TestIndexNodeReusedWhileMoving: a node the move's walk has not reached
// yet, freed and handed out again for another key while the index moves,
// has that key put in the table once (the walk passes it: fresh), the
// freed key's old entry is gone, and the key is found through the move's
// end; a node the walk passed, reused, is found through the table.
func TestIndexNodeReusedWhileMoving(t *testing.T) {
	ih := newIndexHarness(t)
	x := &ih.x
	for i := uint64(0); !x.moving(); i++ {
		ih.add(Key{1, i}, nil)
	}
	require := func(cond bool, format string, args ...any) {
		t.Helper()
		if !cond {
			t.Fatalf(format, args...)
		}
	}
	// The key of the last node before the move (its entry in the old
	// table): the walk is at its start.
	last := -1
	for j, k := range ih.keys {
		if ih.live[k] < x.end && (last < 0 || ih.live[k] > ih.live[ih.keys[last]]) {
			last = j
		}
	}
	node := ih.live[ih.keys[last]]
	require(node >= x.cursor, "node %d already walked (cursor %d)", node, x.cursor)
	ih.del(last)
	ih.add(Key{2, 0}, nil) // takes the freed node: the lowest free
	require(ih.live[Key{2, 0}] == node, "the new key got node %d, want the freed %d", ih.live[Key{2, 0}], node)
	// A node the walk passed, reused.
	first := 0
	for j, k := range ih.keys {
		if ih.live[k] < ih.live[ih.keys[first]] {
			first = j
		}
	}
	low := ih.live[ih.keys[first]]
	require(low < x.cursor, "node %d not walked yet (cursor %d)", low, x.cursor)
	ih.del(first)
	ih.add(Key{3, 0}, nil)
	require(ih.live[Key{3, 0}] == low, "the new key got node %d, want the freed %d", ih.live[Key{3, 0}], low)
	for x.moving() {
		ih.add(Key{4, uint64(len(ih.keys))}, nil)
		for k, i := range ih.live {
			if _, got := x.lookup(k); got != i {
				t.Fatalf("lookup %v = %d, want %d (walked to %d of %d)", k, got, i, x.cursor, x.end)
			}
		}
	}
	require(liveEntries(flat(&x.table)) == len(ih.live), "%d entries in the table for %d keys", liveEntries(flat(&x.table)), len(ih.live))
	for _, k := range []Key{{2, 0}, {3, 0}} {
		_, got := x.lookup(k)
		require(got == ih.live[k], "lookup %v = %d after the move, want %d", k, got, ih.live[k])
	}
}
