package wheel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkIndexInvariants checks w's index against its slab, entry by entry,
// as the move in slab order relies on it (index.go): every node the slab
// handed out and did not get back has exactly one live entry, with its
// key's tag, in the table (a node below the walk's cursor or past its end,
// or one noted fresh) or in the old table (a node from cursor to end not
// fresh); no entry names a free node or a node twice; oldLive, count and
// tombs are what the tables hold; the table stays within 3/4, or 13/16
// when its live entries are within 3/4 (tombstones purged in place); and a
// look-up of each live node's key finds that node. A ghost entry (a key
// put twice, or left behind by a freed node) shows here long before a
// look-up stumbles on it.
func checkIndexInvariants(t testing.TB, w *Wheel) {
	t.Helper()
	x, s := &w.index, &w.nodes
	live := map[uint32]bool{}
	keys := map[Key]uint32{}
	for i := s.nsent; i < s.n; i++ {
		n := s.get(i)
		if n.wprev == markFree {
			continue
		}
		k := Key{n.receiver, n.tid}
		if j, dup := keys[k]; dup {
			t.Fatalf("nodes %d and %d both hold key %v", j, i, k)
		}
		keys[k], live[i] = i, true
		if got := x.find(k); got != i {
			t.Fatalf("find(%v) = %d, want node %d (moving %v, cursor %d, end %d)", k, got, i, x.moving(), x.cursor, x.end)
		}
		if pos, _ := x.lookup(k); x.position(hash(k), i) != pos {
			t.Fatalf("position(%v, %d) = %#x, lookup's %#x (moving %v, cursor %d, end %d)", k, i, x.position(hash(k), i), pos, x.moving(), x.cursor, x.end)
		}
	}
	require.Equal(t, len(live), int(x.count), "index count against the slab's live nodes")
	seen := map[uint32]string{}
	entry := func(where string, e, im uint32) uint32 {
		i := e & im
		if !live[i] {
			t.Fatalf("%s entry %#x names node %d, not live (moving %v, cursor %d, end %d)", where, e, i, x.moving(), x.cursor, x.end)
		}
		n := s.get(i)
		if tg := tag(hash(Key{n.receiver, n.tid}), im); e&^im != tg {
			t.Fatalf("%s entry %#x of node %d has tag %#x, want %#x", where, e, i, e&^im, tg)
		}
		if w, dup := seen[i]; dup {
			t.Fatalf("node %d has entries in the %s and the %s table", i, w, where)
		}
		seen[i] = where
		return i
	}
	var inTable, tombs int
	for _, e := range flat(&x.table) {
		switch e {
		case 0:
		case tomb:
			tombs++
		default:
			i := entry("new", e, x.table.imask)
			if x.moving() && i >= x.cursor && i < x.end && !x.isFresh(i) {
				t.Fatalf("node %d (not fresh, cursor %d, end %d) has its entry in the table before the walk reached it", i, x.cursor, x.end)
			}
			inTable++
		}
	}
	require.Equal(t, tombs, int(x.tombs), "tombstones in the table")
	inOld := 0
	if x.moving() {
		im := x.old.imask
		for _, e := range flat(&x.old) {
			if e <= tomb || e&im < x.cursor { // empty, tombstone or stale
				continue
			}
			i := entry("old", e, im)
			if i >= x.end || x.isFresh(i) {
				t.Fatalf("old entry of node %d (fresh %v, end %d)", i, x.isFresh(i), x.end)
			}
			inOld++
		}
		require.Equal(t, inOld, int(x.oldLive), "oldLive against the old table's entries of unwalked nodes")
		require.LessOrEqual(t, x.cursor, x.end)
		require.LessOrEqual(t, x.end, s.n)
	} else {
		require.Zero(t, x.oldLive)
		require.Nil(t, x.fresh)
	}
	require.Equal(t, len(live), inTable+inOld, "entries against live nodes")
	if uint64(inTable+tombs)*4 > (x.mask+1)*3 {
		require.LessOrEqual(t, uint64(inTable+tombs)*16, (x.mask+1)*13, "the table past 13/16")
		require.LessOrEqual(t, uint64(inTable)*4, (x.mask+1)*3, "the table past 3/4 with live entries past 3/4")
	}
}

// movePropRun drives a small wheel whose index moves over and over (its
// population swings between a handful and thousands of timers, so that
// the index doubles, and rebuilds at its size with the slab's high-water
// mark far above the live timers: stepFor's long steps) with random adds
// (Replace among them: the freed node taken again at once), cancels,
// CancelAll, pauses, resumes, reschedules, firings whose callbacks add,
// replace and cancel, Frozens encoded a piece between operations, and now
// and then a restore (a restored index is at most 3/4 full: the next adds
// move it). After every operation it checks the index (checkIndexInvariants)
// and the timers against a model of which keys are live and paused.
type movePropRun struct {
	t    *testing.T
	rng  *rand.Rand
	cfg  Config
	w    *Wheel
	live map[Key]bool // key -> paused
	// target is the population the adds aim at.
	target int
	nRecv  uint64
	nTid   uint64
	// A Frozen being encoded a piece at a time, and the stopped world's
	// snapshot at its instant.
	frozen *Frozen
	want   []byte
	got    []byte
	// Coverage, checked at the end.
	moves, grows, rebuilds, longSteps, fresh, restores, frozenMoves, snapshots, replaced, renumbers int
	purges, purgeSteps                                                                              int
	lastSeq                                                                                         uint32
	wasMoving                                                                                       bool
	lastPurge                                                                                       uint64
}

func (r *movePropRun) key() Key {
	return Key{r.rng.Uint64N(r.nRecv), r.rng.Uint64N(r.nTid)}
}

func (r *movePropRun) spec() Spec {
	s := Spec{After: 1 + r.rng.Uint64N(40), Replace: r.rng.IntN(3) == 0}
	switch r.rng.IntN(8) {
	case 0, 1, 4, 5, 6:
		s.Repeat = uint32(1 + r.rng.IntN(3)) // removed by its last firing
	case 2:
		s.Every = 1 << 33 // in the extras
	case 3:
		s.Data = bytes.Repeat([]byte{byte(r.rng.Uint32())}, 1+r.rng.IntN(40)) // in the extras
	}
	return s
}

func (r *movePropRun) add(k Key, s Spec) {
	paused, had := r.live[k]
	err := r.w.Add(k, s)
	switch {
	case had && !s.Replace:
		require.ErrorIs(r.t, err, ErrExists, "Add(%v) of a live key", k)
		r.live[k] = paused
	default:
		require.NoError(r.t, err, "Add(%v) (live %v)", k, had)
		if had {
			r.replaced++
		}
		r.live[k] = false
	}
}

func (r *movePropRun) cancel(k Key) {
	_, had := r.live[k]
	err := r.w.Cancel(k)
	if had {
		require.NoError(r.t, err, "Cancel(%v) of a live key", k)
		delete(r.live, k)
	} else {
		require.ErrorIs(r.t, err, ErrNotFound, "Cancel(%v) of an absent key", k)
	}
}

func (r *movePropRun) callback(f *Fire) {
	paused, had := r.live[f.Key]
	require.True(r.t, had && !paused, "fired %v: live %v paused %v", f.Key, had, paused)
	if f.Last {
		delete(r.live, f.Key)
	}
	switch r.rng.IntN(8) {
	case 0:
		if len(r.live) < r.target {
			r.add(r.key(), r.spec())
		} else {
			r.cancel(r.someLive())
		}
	case 1:
		r.add(f.Key, Spec{After: 1 + r.rng.Uint64N(5), Replace: true}) // the firing timer's node, reused when Last
	case 2:
		r.cancel(r.key())
	case 3:
		if !f.Last {
			require.NoError(r.t, r.w.Reschedule(f.Key, r.w.Now()+1+r.rng.Uint64N(20)))
		}
	}
}

// tombstones cancels, when the index is not moving, every timer whose
// entry is not the last of its probe run: each deletion leaves a
// tombstone (as TestIndexRebuildSpread does to an index alone), so that
// adds of keys whose home entry is empty (emptyHomeKey) soon make the index
// rebuild at its size.
func (r *movePropRun) tombstones() {
	x := &r.w.index
	if x.moving() {
		return
	}
	var doomed []Key
	for p := range x.table.len() {
		e, next := *x.table.at(p), *x.table.at((p + 1) & x.mask)
		if e > tomb && next != 0 {
			n := r.w.nodes.get(e & x.table.imask)
			doomed = append(doomed, Key{n.receiver, n.tid})
		}
	}
	for _, k := range doomed {
		r.cancel(k)
	}
}

// absentKey returns a key with no timer, whose home entry in the index's
// table is empty when emptyHome says so and one of many random keys is.
func (r *movePropRun) absentKey(emptyHome bool) Key {
	x := &r.w.index
	for range 200 {
		k := r.key()
		if _, had := r.live[k]; !had && (!emptyHome || *x.table.at(hash(k) & x.mask) == 0) {
			return k
		}
	}
	return r.key()
}

// forceRebuild has the index rebuilt at its size, as random churn rarely
// does: it finishes a move going on, fills the table to 3/4 with adds,
// turns every entry but the last of each probe run into a tombstone
// (tombstones) and adds keys whose home entry is empty until a move
// starts. It gives up (random operations then go on) when the runs left
// are more than 3/8 of the table (the move would grow it).
func (r *movePropRun) forceRebuild() {
	x := &r.w.index
	for x.moving() {
		r.add(r.absentKey(false), Spec{After: 1 + r.rng.Uint64N(40)})
	}
	for uint64(x.count+x.tombs+2)*4 <= (x.mask+1)*3 {
		r.add(r.absentKey(false), Spec{After: 1 + r.rng.Uint64N(40), Repeat: 1})
	}
	r.tombstones()
	for !x.moving() && uint64(x.count+1)*8 <= (x.mask+1)*3 {
		r.add(r.absentKey(true), Spec{After: 1 + r.rng.Uint64N(40), Repeat: 1})
	}
	r.note()
}

func (r *movePropRun) op() {
	w := r.w
	switch c := r.rng.IntN(100); {
	case c < 45:
		if len(r.live) < r.target {
			r.add(r.key(), r.spec())
		} else {
			r.cancel(r.key())
		}
	case c < 60:
		r.cancel(r.someLive())
	case c < 61:
		recv := r.rng.Uint64N(r.nRecv)
		want := 0
		for k := range r.live {
			if k.Receiver == recv {
				want++
				delete(r.live, k)
			}
		}
		require.Equal(r.t, want, w.CancelAll(recv), "CancelAll(%d)", recv)
	case c < 68:
		k := r.someLive()
		paused, had := r.live[k]
		err := w.Pause(k)
		switch {
		case !had:
			require.ErrorIs(r.t, err, ErrNotFound)
		case paused:
			require.ErrorIs(r.t, err, ErrPaused)
		default:
			require.NoError(r.t, err)
			r.live[k] = true
		}
	case c < 75:
		k := r.someLive()
		paused, had := r.live[k]
		err := w.Resume(k)
		switch {
		case !had:
			require.ErrorIs(r.t, err, ErrNotFound)
		case !paused:
			require.ErrorIs(r.t, err, ErrNotPaused)
		default:
			require.NoError(r.t, err)
			r.live[k] = false
		}
	case c < 78:
		k := r.someLive()
		paused, had := r.live[k]
		err := w.Reschedule(k, w.Now()+1+r.rng.Uint64N(30))
		switch {
		case !had:
			require.ErrorIs(r.t, err, ErrNotFound)
		case paused:
			require.ErrorIs(r.t, err, ErrPaused)
		default:
			require.NoError(r.t, err)
		}
	default:
		max := 0
		if r.rng.IntN(3) == 0 {
			max = 1 + r.rng.IntN(50)
		}
		w.Advance(w.Now()+r.rng.Uint64N(6), max, r.callback)
	}
}

// someLive returns a live key most of the time, else any key.
func (r *movePropRun) someLive() Key {
	if len(r.live) > 0 && r.rng.IntN(4) != 0 {
		n := r.rng.IntN(len(r.live))
		for k := range r.live {
			if n == 0 {
				return k
			}
			n--
		}
	}
	return r.key()
}

// check compares the wheel with the model: Len, and Get of every live key
// and of random keys (live or not).
func (r *movePropRun) check() {
	w := r.w
	require.Equal(r.t, len(r.live), w.Len(), "Len")
	for k, paused := range r.live {
		in, err := w.Get(k)
		require.NoError(r.t, err, "Get(%v) of a live key (moving %v)", k, w.index.moving())
		require.Equal(r.t, k, in.Key)
		require.Equal(r.t, paused, in.Paused, "Get(%v).Paused", k)
	}
	for range 8 {
		k := r.key()
		_, had := r.live[k]
		if _, err := w.Get(k); had {
			require.NoError(r.t, err)
		} else {
			require.ErrorIs(r.t, err, ErrNotFound, "Get(%v) of an absent key (moving %v)", k, w.index.moving())
		}
	}
}

// note counts the index's moves and what they went through.
func (r *movePropRun) note() {
	x := &r.w.index
	if x.moving() && !r.wasMoving {
		r.moves++
		if x.mask > x.oldMask {
			r.grows++
		} else {
			r.rebuilds++
		}
		if x.step > migrateStep {
			r.longSteps++
		}
		if r.frozen != nil {
			r.frozenMoves++
		}
	}
	if x.fresh != nil && r.wasMoving && x.moving() {
		r.fresh++
	}
	r.wasMoving = x.moving()
	if x.purgeLeft > r.lastPurge {
		r.purges++
	} else if x.purgeLeft != 0 && x.purgeLeft < r.lastPurge {
		r.purgeSteps++
	}
	r.lastPurge = x.purgeLeft
	if r.w.seq < r.lastSeq {
		r.renumbers++
	}
	r.lastSeq = r.w.seq
}

// snapshotStep starts a Frozen, or encodes a piece of the one being
// encoded and, when it is done, checks it against the stopped world's
// snapshot of its instant.
func (r *movePropRun) snapshotStep() {
	if r.frozen == nil {
		if r.rng.IntN(40) != 0 {
			return
		}
		r.want = snapshotOf(r.t, r.w, 0)
		r.frozen, r.got = r.w.Freeze(), nil
		return
	}
	var done bool
	r.got, done = r.frozen.AppendNext(r.got, 1+r.rng.IntN(150))
	if !done {
		return
	}
	r.frozen.Release()
	r.frozen = nil
	requireSameState(r.t, r.want, r.got, "the snapshot is not the state at its instant")
	r.snapshots++
}

// restore replaces the wheel by one restored from its snapshot.
func (r *movePropRun) restore() {
	if r.frozen != nil {
		r.frozen.Release()
		r.frozen = nil
	}
	seqMax := r.w.seqMax
	r.w = restoreOf(r.t, r.cfg, snapshotOf(r.t, r.w, 0), r.rng)
	r.w.seqMax = seqMax
	r.wasMoving, r.lastSeq = false, r.w.seq
	r.restores++
	checkIndexInvariants(r.t, r.w)
	r.check()
}

// TestIndexMovesProperty: see movePropRun. It covers what the index's
// unit tests (indexHarness) cannot: the wheel's own paths that allocate
// and free nodes (Replace reusing the freed node in the same Add, a
// callback's adds while a timer fires, CancelAll, restore then growth)
// while moves, of both kinds, are under way, with Frozens encoded across
// them; and the index's state entry by entry, not only its look-ups.
func TestIndexMovesProperty(t *testing.T) {
	seeds, ops := 8, 10000
	if testing.Short() {
		seeds, ops = 2, 4000
	}
	runIndexMoves(t, seeds, ops)
}

// TestIndexMovesPropertyMapped is TestIndexMovesProperty with every slab
// block and index table outside the Go heap and freed mappings poisoned
// (lowBigMem): an old table read after its move ended (and unmapped)
// faults, as would a block of nodes read after its region went.
func TestIndexMovesPropertyMapped(t *testing.T) {
	lowBigMem(t)
	seeds, ops := 3, 6000
	if testing.Short() {
		seeds, ops = 1, 3000
	}
	runIndexMoves(t, seeds, ops)
}

// runIndexMoves runs seeds movePropRuns of ops operations each: seeds 0-3
// with tables of any size purged (purgeSmall), 4-7 with none (small
// tables are doubled by their tombstones).
func runIndexMoves(t *testing.T, seeds, ops int) {
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			purges := seed%8 < 4
			if purges {
				purgeSmall(t)
			}
			rng := rand.New(rand.NewPCG(seed, 0x1d3))
			cfg := Config{}
			if seed%4 >= 2 {
				cfg = Config{Levels: 3, Slots: 4}
			}
			r := &movePropRun{t: t, rng: rng, cfg: cfg, w: newWheel(t, rng.Uint64N(1<<40), cfg),
				live: map[Key]bool{}, nRecv: 6, nTid: 1000}
			if seed%2 == 1 {
				r.w.seqMax = 700 // renumbers (in an Add, between its node's alloc and its insertion) every few hundred adds
			}
			// The population swings: growth, then churn well below 3/8 of
			// the table (tombstones, then rebuilds at the same size), a few.
			// Up to 90 timers: a table of 128 rebuilt often; up to 420: 1024.
			scale := []float64{90, 420}[seed%2]
			for op := range ops {
				phase := op / 500 % 8
				if op%500 == 0 {
					r.target = int(scale * []float64{0.2, 1, 0.02, 0.4, 0.4, 1, 0.3, 0.7}[phase])
				}
				if op%1000 == 700 {
					r.forceRebuild()
				}
				r.op()
				r.note()
				r.snapshotStep()
				if r.w.index.moving() || r.w.index.purgeLeft != 0 || op%4 == 0 {
					checkIndexInvariants(t, r.w)
					r.check()
				}
				if op%1900 == 1899 {
					r.restore()
				}
			}
			if r.frozen != nil {
				r.frozen.Release()
			}
			t.Logf("purges %d (ops stepping one %d), moves %d (grows %d, rebuilds %d, long steps %d), ops seeing fresh nodes %d, replaces %d, restores %d, snapshots %d (moves under a Frozen %d), renumbers %d",
				r.purges, r.purgeSteps, r.moves, r.grows, r.rebuilds, r.longSteps, r.fresh, r.replaced, r.restores, r.snapshots, r.frozenMoves, r.renumbers)
			require.Positive(t, r.grows, "no growth")
			require.Positive(t, r.rebuilds, "no rebuild at the same size")
			if purges {
				require.Positive(t, r.purges, "no purge of tombstones") // (an operation between a purge's steps: not always, the run's path follows Go's map order)
			} else {
				require.Zero(t, r.purges, "a purge of a table under purgeMinEntries")
			}
			require.Positive(t, r.fresh, "no node noted fresh")
			require.Positive(t, r.replaced, "no Replace of a live timer")
			require.Positive(t, r.snapshots, "no snapshot checked")
			if seed%2 == 1 {
				require.Positive(t, r.renumbers, "no renumbering")
			}
		})
	}
}
