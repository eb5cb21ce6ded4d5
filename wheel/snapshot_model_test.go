package wheel

// Randomized snapshot tests. TestSnapshotTwins drives two wheels that must
// stay observably identical, a and b, with the same random operations and
// compares every result and firing; every so often it snapshots both (the
// bytes must be equal, however different their geometries and histories)
// and replaces one of them by a wheel restored from the snapshot, in a
// random geometry. TestSnapshotModel runs the model tests' operation
// streams (see model_test.go) with the wheel replaced by its restored copy
// every so often, so the reference model checks the restored wheels.

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

type twinRun struct {
	t          *testing.T
	rng        *rand.Rand
	a, b       *Wheel
	recvs      []uint64
	tids       []uint64
	logA, logB []any // firings and callback results of the current Advance
	restores   int
}

// twinGeometries are the geometries the twins are restored into.
var twinGeometries = []Config{{}, {Levels: 2, Slots: 4}, {Levels: 1, Slots: 2}, {Levels: 3, Slots: 3}, {Levels: 8, Slots: 256}, {Levels: 2, Slots: 65}}

func TestSnapshotTwins(t *testing.T) {
	seeds, ops := 12, 4000
	if testing.Short() {
		seeds, ops = 3, 1500
	}
	for gi, cfg := range twinGeometries {
		for seed := range uint64(seeds) {
			rng := rand.New(rand.NewPCG(seed, uint64(gi)+100))
			starts := []uint64{0, rng.Uint64(), math.MaxUint64 - 1000, 1<<32 - 3, math.MaxUint64 - 3, 4*4*4 - 2}
			start := starts[seed%uint64(len(starts))]
			t.Run(fmt.Sprintf("%d/seed=%d", gi, seed), func(t *testing.T) {
				r := &twinRun{t: t, rng: rng, recvs: []uint64{0, 1, 7, math.MaxUint64}}
				for i := range 24 {
					r.tids = append(r.tids, uint64(i))
				}
				r.tids = append(r.tids, math.MaxUint64, 1<<63)
				r.a = newWheel(t, start, cfg)
				if seed%3 == 1 {
					r.a.seqMax = 100 + uint32(seed) // renumbers often
				}
				r.b = restoreOf(t, twinGeometries[rng.IntN(len(twinGeometries))], snapshotOf(t, r.a, 0), rng)
				for op := range ops {
					r.step(op)
					if rng.IntN(40) == 0 {
						r.snapshot()
					}
				}
				r.snapshot()
				if r.restores == 0 {
					t.Fatal("no restore")
				}
			})
		}
	}
}

// step applies one random operation to both wheels and compares them.
func (r *twinRun) step(op int) {
	t, rng := r.t, r.rng
	k := Key{r.recvs[rng.IntN(len(r.recvs))], r.tids[rng.IntN(len(r.tids))]}
	same := func(what string, x, y any) {
		t.Helper()
		require.Equal(t, x, y, "op %d: %s %v", op, what, k)
	}
	switch c := rng.IntN(100); {
	case c < 30:
		s := r.spec()
		same("Add", r.a.Add(k, s), r.b.Add(k, s))
	case c < 36:
		s, now := r.spec(), satAdd(r.a.Now(), rng.Uint64N(100))
		da, ea := r.a.AddFrom(k, s, now)
		db, eb := r.b.AddFrom(k, s, now)
		same("AddFrom", [2]any{da, ea}, [2]any{db, eb})
	case c < 44:
		same("Cancel", r.a.Cancel(k), r.b.Cancel(k))
	case c < 51:
		same("Pause", r.a.Pause(k), r.b.Pause(k))
	case c < 58:
		same("Resume", r.a.Resume(k), r.b.Resume(k))
	case c < 60:
		same("CancelAll", r.a.CancelAll(k.Receiver), r.b.CancelAll(k.Receiver))
	case c < 61:
		s := r.spec()
		for i := range 50 + rng.IntN(300) { // many timers on few ticks
			k := Key{r.recvs[i%len(r.recvs)], 1000 + uint64(i)}
			same("burst Add", r.a.Add(k, s), r.b.Add(k, s))
		}
	default:
		r.advance(op)
	}
	ga, ea := r.a.Get(k)
	gb, eb := r.b.Get(k)
	same("Get", [2]any{ga, ea}, [2]any{gb, eb})
	requireSameNextEvent(t, r.a, r.b, "op", op)
	same("Len", r.a.Len(), r.b.Len())
	same("DataBytes", r.a.DataBytes(), r.b.DataBytes())
}

// delta returns a distance: small, slot and level sized, huge, or about
// the distance to 2^64-1 (some overflow).
func (r *twinRun) delta() uint64 {
	rng := r.rng
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3:
		return 1 + rng.Uint64N(8)
	case 4, 5:
		return 1 + rng.Uint64N(20000)
	case 6:
		return rng.Uint64() >> rng.IntN(64)
	case 7:
		return math.MaxUint64 - r.a.Now() - 2 + rng.Uint64N(4)
	case 8:
		pw := []uint64{4, 16, 64, 100, 10000, 65 * 65, 1 << 32, 1 << 56}
		return pw[rng.IntN(len(pw))] + rng.Uint64N(3) - 1
	default:
		return rng.Uint64()
	}
}

func (r *twinRun) spec() Spec {
	rng := r.rng
	var s Spec
	if rng.IntN(5) == 0 {
		s.At = r.a.Now() + r.delta()
	} else {
		s.After = r.delta()
	}
	switch rng.IntN(6) {
	case 3:
		s.Every = 1 + rng.Uint64N(5)
	case 4:
		s.Every = r.delta()
	case 5:
		s.Every = 1<<32 + rng.Uint64N(3)
	}
	s.Repeat = uint32(rng.IntN(5))
	if rng.IntN(10) == 0 {
		s.Repeat = math.MaxUint32
	}
	switch rng.IntN(5) {
	case 0:
		s.Data = bytes.Repeat([]byte{byte(rng.Uint32())}, 1+rng.IntN(16))
	case 1:
		s.Data = bytes.Repeat([]byte{byte(rng.Uint32())}, 17+rng.IntN(300))
	}
	s.Replace = rng.IntN(3) == 0
	return s
}

// advance runs the same bounded Advance on both wheels, their callbacks
// mutating them alike, and compares the firings.
func (r *twinRun) advance(op int) {
	rng, now := r.rng, r.a.Now()
	to := satAdd(now, rng.Uint64N(10))
	switch rng.IntN(6) {
	case 0:
		to = satAdd(now, r.delta())
	case 1:
		if tick, ok := r.a.NextEvent(); ok {
			to = tick + rng.Uint64N(3) - 1
		}
	case 2:
		to = math.MaxUint64
	}
	max := 1 + rng.IntN(300)
	r.logA, r.logB = r.logA[:0], r.logB[:0]
	na, da := r.a.Advance(to, max, r.callback(r.a, &r.logA))
	nb, db := r.b.Advance(to, max, r.callback(r.b, &r.logB))
	require.Equal(r.t, r.logA, r.logB, "op %d: Advance(%d, %d) from %d", op, to, max, now)
	require.Equal(r.t, [2]any{na, da}, [2]any{nb, db}, "op %d: Advance(%d, %d) from %d", op, to, max, now)
}

// callback logs each firing into log and, depending only on the firing,
// mutates w (or snapshots it) and logs the result.
func (r *twinRun) callback(w *Wheel, log *[]any) func(*Fire) {
	return func(f *Fire) {
		c := *f
		c.Data = bytes.Clone(f.Data)
		*log = append(*log, c)
		var res any
		switch (f.Tid ^ f.Tick ^ f.Fired) % 16 {
		case 0:
			res = w.Cancel(Key{f.Receiver, f.Tid + 1})
		case 1: // with the firing's data: it stays intact meanwhile
			res = w.Add(Key{f.Receiver, f.Tid ^ 1}, Spec{After: 1 + f.Tick%7, Repeat: 2, Data: f.Data, Replace: true})
		case 2:
			res = w.Pause(f.Key)
		case 3:
			res = w.Resume(Key{f.Receiver, f.Tid ^ 2})
		case 4: // a snapshot from inside a callback
			res = crc32.Checksum(snapshotOf(r.t, w, 0), castagnoli)
		default:
			return
		}
		*log = append(*log, res)
	}
}

// snapshot checks that both wheels encode to the same bytes and look the
// same, and replaces one by a wheel restored from the snapshot.
func (r *twinRun) snapshot() {
	t, rng := r.t, r.rng
	sa := snapshotOf(t, r.a, rng.IntN(3)*rng.IntN(200))
	sb := snapshotOf(t, r.b, rng.IntN(3)*rng.IntN(200))
	requireSameState(t, sa, sb, "snapshots of the twins differ")
	requireSameWheels(t, r.a, r.b, r.recvs)
	// Into a random geometry, or the other twin's, where NextEvent must agree.
	cfg := twinGeometries[rng.IntN(len(twinGeometries))]
	switch rng.IntN(4) {
	case 0:
		r.b = restoreOf(t, cfg, sa, rng)
		require.Equal(t, sa, snapshotOf(t, r.b, 0))
	case 1:
		r.a = restoreOf(t, cfg, sb, rng)
	case 2:
		r.b = restoreOf(t, Config{Levels: r.a.levels, Slots: r.a.slots}, sa, rng)
		requireSameNextEvent(t, r.a, r.b)
	default:
		return
	}
	r.restores++
}

// TestSnapshotModel runs model operation streams (as TestModel does) and,
// every few operations, replaces the wheel by its restored snapshot in the
// same geometry or the default one, checking that the snapshot of the
// restored wheel is the same bytes and that NextEvent agrees.
func TestSnapshotModel(t *testing.T) {
	seeds, bodyLen := 8, 20000
	if testing.Short() {
		seeds, bodyLen = 2, 3000
	}
	for gi := range modelGeometries {
		for seed := range uint64(seeds) {
			rng := rand.New(rand.NewPCG(seed, uint64(gi)+200))
			start := []uint64{0, rng.Uint64(), math.MaxUint64 - 500}[seed%3]
			data := append(encodeHeader(gi, start, int(seed)%len(modelKeySpaces), seed%2 == 1), seedBody(seed<<8|uint64(gi)+77, bodyLen)...)
			t.Run(fmt.Sprintf("%d/seed=%d", gi, seed), func(t *testing.T) {
				runModelSwaps(t, data, rng)
			})
		}
	}
}

// runModelSwaps is execOps with the wheel replaced by its restored
// snapshot after about one operation in 25.
func runModelSwaps(t *testing.T, data []byte, rng *rand.Rand) {
	p, body := decodeHeader(data)
	src := &opSource{data: body}
	r := newModelRunner(p, src, nil)
	swaps := 0
	defer func() {
		if e := recover(); e != nil {
			t.Fatalf("%s, op #%d after %d swaps: %v\n%s", p, r.op, swaps, e, debug.Stack())
		}
	}()
	for end := 0; !src.exhausted() && end < 30; r.op++ {
		if r.m.now == math.MaxUint64 {
			end++
		}
		r.step()
		r.checkAll()
		if rng.IntN(25) != 0 {
			continue
		}
		cfg := p.cfg
		if rng.IntN(2) == 0 {
			cfg = Config{}
		}
		snap := snapshotOf(t, r.w, rng.IntN(100))
		w := restoreOf(t, cfg, snap, rng)
		require.Equal(t, snap, snapshotOf(t, w, 0), "op %d: the restored slab is in the snapshot's order, the seq numbers kept", r.op)
		requireSameNextEvent(t, r.w, w, "op", r.op)
		r.w = w
		r.checkAll()
		swaps++
	}
	if swaps == 0 && r.op > 100 {
		t.Fatal("no swap")
	}
}
