package wheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel/internal/bigmem"
)

// lowBigMem puts every slab block and every index table of the wheels
// made from now on outside the Go heap (heapBlocks 0: the sentinels' block
// too; mapMinEntries the smallest table), and has freed memory fault when
// touched (bigmem.SetPoison) rather than be unmapped, where the next Map
// may reuse its addresses and a stale pointer would go unnoticed. It skips
// t where nothing can be mapped outside the heap.
func lowBigMem(t *testing.T) {
	withMapping(t, 0, minIndexSize)
	poisoned := bigmem.SetPoison(true)
	t.Cleanup(func() { bigmem.SetPoison(poisoned) })
}

// settledMapped returns Mapped once collections no longer change it: the
// baseline of a test that checks it comes back, with the cleanups of what
// earlier tests dropped run.
func settledMapped() int64 {
	last := int64(-1)
	for range 100 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if m := bigmem.Mapped(); m != last {
			last = m
			continue
		}
		break
	}
	return last
}

// awaitMapped collects until Mapped is back to want (the cleanups of the
// Mems no longer reachable run on their own goroutine), and fails t if it
// is not within a few seconds.
func awaitMapped(t testing.TB, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for bigmem.Mapped() != want && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, want, bigmem.Mapped(), "Mapped is back where it started once the wheels are collected")
}

// frozenRun is a Frozen being encoded on its own goroutine, and the state
// of the wheel when it was taken.
type frozenRun struct {
	f    *Frozen
	want []byte // the wheel's snapshot at the Freeze, encoded at once
	out  chan []byte
}

// encodeAside encodes f on a goroutine of its own, in small pieces,
// yielding between them, while the caller goes on changing the wheel.
func encodeAside(f *Frozen) chan []byte {
	out := make(chan []byte, 1)
	f.SetYield(runtime.Gosched)
	go func() {
		var b []byte
		for done := false; !done; {
			b, done = f.AppendNext(b, 512)
			runtime.Gosched()
		}
		out <- b
	}()
	return out
}

// restoreAside restores snapshot b into a wheel of geometry cfg in pieces
// of at most piece bytes, with its index built on another goroutine from
// the marks of each piece (IndexBuilder). With stopAt >= 0 it drops the
// Restorer after stopAt bytes, its builder's work done, and returns nil.
func restoreAside(t testing.TB, cfg Config, b []byte, piece, stopAt int) *Wheel {
	t.Helper()
	r, err := NewRestorer(cfg)
	require.NoError(t, err)
	marks := make(chan RestoreMark, 8)
	built := make(chan bool, 1)
	started := false
	for off := 0; off < len(b); off += piece {
		if stopAt >= 0 && off >= stopAt {
			break
		}
		_, err := r.Write(b[off:min(off+piece, len(b))])
		require.NoError(t, err)
		if ib := r.IndexBuilder(); ib != nil && !started {
			started = true
			go func() {
				ok := true
				for m := range marks {
					ok = ib.Add(m) && ok
				}
				built <- ok
			}()
		}
		if started {
			marks <- r.Ready()
		}
	}
	close(marks)
	if started {
		require.True(t, <-built, "no duplicate key")
	}
	if stopAt >= 0 {
		return nil
	}
	w, err := r.Wheel()
	require.NoError(t, err)
	return w
}

// bigMemRun drives a model run (model_test.go) whose wheel has all its
// memory outside the Go heap through growth, shrinkage and churn over and
// over: the index moves to bigger tables many times (and, rarely, rebuilds
// at the same size: TestIndexMovesMapped forces that), mostly while
// Frozens are encoded on other goroutines, while whole wheels are restored
// (their index built aside) and swapped in for the one being driven, which
// is dropped, and with collections between the steps, so that a cleanup
// unmaps whatever is no longer reachable. Every step is checked against
// the model; each Frozen's snapshot restores to the state at its Freeze.
type bigMemRun struct {
	t      *testing.T
	r      *modelRunner
	rng    *rand.Rand
	frozen []*frozenRun
	// fresh is the last fresh key's tid (from 2^50: outside the key
	// space); while churn is set, anyKey returns fresh keys half the time.
	fresh uint64
	churn bool
	stats struct{ moves, mappedTables, freezes, swaps, dropped int } // what the run covered
}

func (b *bigMemRun) live() int { return len(b.r.m.timers) }

// anyKey returns a key of the run's key space; liveKey one of a timer the
// model holds (any key when none).
func (b *bigMemRun) anyKey() Key {
	if b.churn && b.rng.IntN(2) == 0 { // a key never used: a home no tombstone of its own holds
		b.fresh++
		return Key{b.r.recvs[b.rng.IntN(len(b.r.recvs))], b.fresh}
	}
	return Key{b.r.recvs[b.rng.IntN(len(b.r.recvs))], b.r.tids[b.rng.IntN(len(b.r.tids))]}
}

func (b *bigMemRun) liveKey() Key {
	if n := b.live(); n > 0 {
		return b.r.m.timers[b.rng.IntN(n)].key
	}
	return b.anyKey()
}

// noteIndex counts the index's moves as they start (for the test's claim
// that it covers them).
func (b *bigMemRun) noteIndex(wasMoving bool) {
	x := &b.r.w.index
	if x.moving() && !wasMoving {
		b.stats.moves++
		if x.table.mem != nil {
			b.stats.mappedTables++
		}
	}
}

// op applies one operation: growing adds mostly, shrinking cancels and
// fires mostly.
func (b *bigMemRun) op(growing bool) {
	r := b.r
	x := &r.w.index
	defer b.noteIndex(x.moving())
	c := b.rng.IntN(100)
	switch {
	case growing && c < 85, !growing && c < 10:
		sp := r.genSpec()
		sp.At, sp.After = 0, 1+uint64(b.rng.IntN(5000)) // keep most: growing is the point
		r.doAdd(b.anyKey(), sp, "")
	case c < 55:
		r.doCancel(b.liveKey(), "")
	case c < 60:
		r.doPause(b.liveKey(), "")
	case c < 65:
		r.doResume(b.liveKey(), "")
	case c < 66:
		r.doCancelAll(r.recvs[b.rng.IntN(len(r.recvs))], "")
	case c < 80: // fire; now and then with callbacks that add, cancel, pause (onFire)
		src, most := r.src, 1+b.rng.IntN(400)
		if b.rng.IntN(8) != 0 {
			r.src = nil // no callback actions: each checks the whole model
		} else {
			most = 1 + b.rng.IntN(20)
		}
		r.doAdvance(r.m.now+uint64(b.rng.IntN(300)), most)
		r.src = src
	default:
		r.checkKey(b.liveKey())
	}
}

// freeze starts encoding a Frozen of the wheel aside; now and then one is
// dropped unencoded and unreleased instead (its cleanup unpins it).
func (b *bigMemRun) freeze() {
	b.stats.freezes++
	if b.rng.IntN(8) == 0 {
		_ = b.r.w.Freeze()
		return
	}
	fr := &frozenRun{want: snapshotOf(b.t, b.r.w, 0)}
	fr.f = b.r.w.Freeze()
	fr.out = encodeAside(fr.f)
	b.frozen = append(b.frozen, fr)
}

// collect checks and releases the Frozens whose encoding is done (all of
// them with wait), on the wheel's goroutine as Release requires.
func (b *bigMemRun) collect(wait bool) {
	keep := b.frozen[:0]
	for _, fr := range b.frozen {
		var out []byte
		if wait {
			out = <-fr.out
		} else {
			select {
			case out = <-fr.out:
			default:
				keep = append(keep, fr)
				continue
			}
		}
		fr.f.Release()
		// The records come in another order when the wheel saved nodes
		// for the encoder (barrier.go): the state they restore to is the same.
		got := restoreAside(b.t, b.r.p.cfg, out, 1+b.rng.IntN(4096), -1)
		require.Equal(b.t, dumpState(restoreOf(b.t, b.r.p.cfg, fr.want, nil)), dumpState(got),
			"the Frozen encoded the wheel as it was at its Freeze")
	}
	clear(b.frozen[len(keep):])
	b.frozen = keep
}

// swap replaces the driven wheel with a restore of its snapshot (the old
// one is dropped, maybe with Frozens of it still encoding, or with one
// taken just before, encoded only once the old wheel is collected); now
// and then it first drops a Restorer of it half-way.
func (b *bigMemRun) swap() {
	r := b.r
	snap := snapshotOf(b.t, r.w, 0)
	if b.rng.IntN(3) == 0 {
		b.stats.dropped++
		restoreAside(b.t, r.p.cfg, snap, 1+b.rng.IntN(2048), b.rng.IntN(len(snap)))
	}
	var outlives *frozenRun
	if b.rng.IntN(2) == 0 { // a Frozen that outlives its wheel, encoded once that is collected
		outlives = &frozenRun{want: snap, f: r.w.Freeze()}
	}
	w := restoreAside(b.t, r.p.cfg, snap, 1+b.rng.IntN(8192), -1)
	w.seqMax = r.w.seqMax
	w.pageMin = r.w.pageMin
	r.w = w
	b.stats.swaps++
	if outlives != nil {
		for range 2 {
			runtime.GC()
			time.Sleep(time.Millisecond) // the cleanups run
		}
		outlives.out = encodeAside(outlives.f)
		b.frozen = append(b.frozen, outlives)
	}
}

// checkpoint compares every live timer and every receiver with the model.
func (b *bigMemRun) checkpoint() {
	r := b.r
	require.Equal(b.t, r.m.now, r.w.Now(), "Now")
	require.Equal(b.t, len(r.m.timers), r.w.Len(), "Len")
	var data uint64
	for _, tm := range r.m.timers {
		data += uint64(len(tm.data))
	}
	require.Equal(b.t, data, r.w.DataBytes(), "DataBytes")
	for _, tm := range r.m.timers {
		r.checkKey(tm.key)
	}
	for _, recv := range r.recvs {
		r.checkReceiver(recv)
	}
	require.GreaterOrEqual(b.t, bigmem.Mapped(), int64(0))
}

func (b *bigMemRun) run(cycles int) {
	for c := range cycles {
		hi := 300 + b.rng.IntN(1500)
		lo := b.rng.IntN(hi / 4)
		for phase := range 3 {
			growing := phase != 1
			// The third phase: as many adds as cancels, at a third of the
			// table, where deletions leave tombstones (in shorter probe
			// runs they clear them) until the index rebuilds at its size.
			churn, at := 0, 0
			if phase == 2 {
				churn, at = 3*int(b.r.w.index.mask+1), int(b.r.w.index.mask+1)/3
				b.fresh, b.churn = max(b.fresh, 1<<50), true
			}
			for steps := 0; steps < 20_000; steps++ {
				if phase == 0 && b.live() >= hi || phase == 1 && b.live() <= lo || phase == 2 && steps >= churn {
					break
				}
				if phase == 2 {
					growing = b.live() < at
				}
				b.op(growing)
				switch k := b.rng.IntN(1000); {
				case k < 4:
					b.freeze()
				case k < 5:
					b.swap()
				case k < 10:
					runtime.GC()
				case k < 30:
					b.collect(false)
				}
			}
			b.churn = false
			b.checkpoint()
		}
		if c%4 == 3 {
			b.collect(true)
			runtime.GC()
		}
	}
	b.collect(true)
	b.checkpoint()
}

// TestBigMemModel runs bigMemRun over a few seeds and geometries: a wheel
// with every block and table outside the heap agrees with the model
// through index moves, Frozens encoded aside, restores and collections;
// a read or write of memory freed faults (the test crashes), and once
// every wheel is dropped, Mapped is back where it started.
func TestBigMemModel(t *testing.T) {
	lowBigMem(t)
	before := settledMapped()
	seeds, cycles := 4, 3
	switch {
	case testing.Short():
		seeds, cycles = 1, 1
	case raceEnabled:
		seeds, cycles = 2, 1
	}
	for seed := range seeds {
		cfg := modelGeometries[[]int{0, 3, 5, 7}[seed%4]]
		p := modelParams{cfg: cfg, nRecv: 4, nTid: 1500, pageMin: 8}
		src := &opSource{data: seedBody(uint64(seed), 1<<22)}
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			b := &bigMemRun{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 7))}
			b.r = newModelRunner(p, src, nil)
			func() {
				defer func() {
					if e := recover(); e != nil {
						if mm, ok := e.(modelMismatch); ok {
							t.Fatalf("op %d: %s", b.r.op, mm)
						}
						panic(e)
					}
				}()
				b.run(cycles)
			}()
			t.Logf("%+v", b.stats)
			require.Positive(t, b.stats.mappedTables, "index tables were mapped")
			require.NotNil(t, b.r.w.nodes.arr.blocks[0].keep, "the slab is outside the heap")
		})
	}
	awaitMapped(t, before)
}

// mappedBy returns the bytes a slab's regions and an index's tables hold
// outside the heap, each mapping once.
func mappedBy(s *slab, x *index) int64 {
	seen := map[*bigmem.Mem]bool{x.table.mem: true, x.old.mem: true, x.next: true} // (next: mapped ahead of a move)
	for _, b := range s.arr.blocks {
		seen[b.keep] = true
	}
	var n int64
	for m := range seen {
		if m != nil {
			n += int64(len(m.Bytes()))
		}
	}
	return n
}

// tombstoneTable fills ih's table (with keys of tids *fresh+1...) to 3/4 and then deletes every entry
// whose next entry is not empty (each leaves a tombstone) but the keys that
// would take the table under 1/8 full (as TestIndexRebuildSpread does),
// and adds keys that land on an empty entry until the index moves: at the
// same size, its live entries under 3/8 of it.
func tombstoneTable(ih *indexHarness, fresh *uint64) (sameSize bool) {
	x := &ih.x
	for x.count < uint32(x.mask+1)*3/4-1 || x.moving() {
		*fresh++
		ih.add(Key{9, *fresh}, nil)
	}
	var doomed []Key
	for p := range x.mask + 1 {
		if e := *x.table.at(p); e > tomb && *x.table.at((p + 1) & x.mask) != 0 {
			n := ih.s.get(e & x.table.imask)
			doomed = append(doomed, Key{n.receiver, n.tid})
		}
	}
	at := map[Key]int{}
	for j, k := range ih.keys {
		at[k] = j
	}
	for _, k := range doomed[:min(len(doomed), int(x.count)-int(x.mask+1)/8)] {
		j := at[k]
		last := ih.keys[len(ih.keys)-1]
		ih.del(j)
		at[last] = j
	}
	size := x.mask + 1
	for !x.moving() {
		*fresh++
		k := Key{10, *fresh}
		if pos, _ := x.lookup(k); *x.table.at(pos) == tomb {
			continue // it would reuse a tombstone: take keys that add one
		}
		ih.add(k, nil)
	}
	return x.mask+1 == size
}

// TestIndexMovesMapped churns an index whose every table is mapped (as
// TestIndexChurnDuringMoves does: it grows, and rebuilds at the same size
// to shed tombstones, over and over), deleting keys found in the old
// table while it moves (positions marked inOld) and looking every live
// key up during moves, with collections now and then: a table freed while
// still read faults (poisoned), and after every operation Mapped is exactly
// the slab's regions and the tables in use (an old table left mapped once
// its move ended, or freed twice, shows).
func TestIndexMovesMapped(t *testing.T) {
	lowBigMem(t)
	before := settledMapped()
	seeds := uint64(6)
	if testing.Short() || raceEnabled {
		seeds = 2
	}
	moves, sameSize, oldDeletes := 0, 0, 0
	for seed := range seeds {
		awaitMapped(t, before) // the last seed's
		ih := newIndexHarness(t)
		x, live := &ih.x, ih.live
		rng := rand.New(rand.NewPCG(seed, 11))
		target, fresh := 0, uint64(0)
		for op := 0; op < 20000; op++ {
			if op%2000 == 0 {
				target = 20 + int(rng.Uint64N(3000))
			}
			wasMoving, size := x.moving(), x.mask+1
			if len(ih.keys) == 0 || len(ih.keys) < target && rng.Uint64N(10) < 6 {
				if k := (Key{rng.Uint64N(8), rng.Uint64N(1 << 40)}); live[k] == 0 {
					ih.add(k, nil)
				}
			} else {
				j := int(rng.Uint64N(uint64(len(ih.keys))))
				if pos, _ := x.lookup(ih.keys[j]); pos&inOld != 0 {
					oldDeletes++
				}
				ih.del(j)
			}
			if op%5000 == 4999 && !x.moving() && tombstoneTable(ih, &fresh) {
				sameSize++ // and the move goes on with the next operations
				moves++
				require.NotNil(t, x.table.mem, "every table is mapped")
			} else if x.moving() && !wasMoving {
				moves++
				require.NotNil(t, x.table.mem, "every table is mapped")
				if x.mask+1 == size {
					sameSize++
				}
			}
			require.Equal(t, mappedBy(&ih.s, x), bigmem.Mapped()-before, "seed %d op %d: Mapped counts the tables in use", seed, op)
			if op%500 == 0 {
				runtime.GC()
			}
			if x.moving() && op%7 == 0 {
				for k, i := range live {
					if _, got := x.lookup(k); got != i {
						t.Fatalf("seed %d op %d: lookup %v = %d, want %d", seed, op, k, got, i)
					}
				}
			}
		}
	}
	t.Logf("%d moves, %d at the same size, %d deletions from the old table", moves, sameSize, oldDeletes)
	require.Positive(t, sameSize, "the index rebuilt at the same size")
	require.Positive(t, oldDeletes, "deletions found their key in the old table")
	awaitMapped(t, before)
}

// TestRestoreFailuresUnmap: a restore that fails (two timers with one key,
// found by Wheel or by the builder aside; a snapshot cut short; a header
// announcing more timers than follow) or a Restorer dropped before Wheel
// leaves nothing mapped once collected, though each mapped its slab
// region and index table (every one outside the heap here).
func TestRestoreFailuresUnmap(t *testing.T) {
	lowBigMem(t)
	before := settledMapped()
	recs := [][]byte{rec(recEveryDelay, 1, 1, 5)}
	for i := range 300 {
		recs = append(recs, rec(recEveryDelay|recSameRecv, uint64(i+2), 5))
	}
	dup := rawSnapshot(7, len(recs)+2, append(recs, rec(recEveryDelay, 3, 1, 5), rec(recEveryDelay, 1, 1, 6))...) // (1, 1) again
	_, err := Restore(Config{}, dup)
	require.ErrorIs(t, err, ErrSnapshot)
	_, err = restoreBuilding(Config{}, dup, nil)
	require.ErrorContains(t, err, "same key")
	awaitMapped(t, before)

	good := rawSnapshot(7, len(recs), recs...)
	_, err = Restore(Config{}, good[:len(good)-3])
	require.ErrorIs(t, err, ErrSnapshot)
	_, err = Restore(Config{}, rawSnapshot(7, 1<<20, recs...)) // 2^21 entries of table: 10 MiB with its filter
	require.ErrorIs(t, err, ErrSnapshot)
	awaitMapped(t, before)

	r, err := NewRestorer(Config{})
	require.NoError(t, err)
	_, err = r.Write(good[:len(good)/2])
	require.NoError(t, err)
	require.Greater(t, bigmem.Mapped(), before, "the restore mapped its region and table")
	r = nil
	awaitMapped(t, before)

	w, err := Restore(Config{}, good)
	require.NoError(t, err)
	require.NotNil(t, w.index.table.mem, "the restored table is the builder's, mapped")
	require.Equal(t, mappedBy(&w.nodes, &w.index), bigmem.Mapped()-before, "the builder's filter is unmapped")
	runtime.KeepAlive(w)
	awaitMapped(t, before)
}
