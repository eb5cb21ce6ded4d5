package wheel

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapshotOf freezes w and encodes it with AppendNext in pieces of at most
// max bytes plus a record (max <= 0: in one call), checking the pieces.
func snapshotOf(t testing.TB, w *Wheel, max int) []byte {
	t.Helper()
	f := w.Freeze()
	defer f.Release()
	var out []byte
	for calls := 0; ; calls++ {
		before := len(out)
		var done bool
		out, done = f.AppendNext(out, max)
		if done {
			break
		}
		require.Greater(t, len(out), before, "AppendNext appended nothing")
		require.Less(t, calls, 1<<24)
	}
	out2, done := f.AppendNext(out, max)
	require.True(t, done)
	require.Len(t, out2, len(out), "AppendNext after done appended")
	return out
}

// restoreOf restores snapshot b into geometry cfg, written in random pieces.
func restoreOf(t testing.TB, cfg Config, b []byte, rng *rand.Rand) *Wheel {
	t.Helper()
	r, err := NewRestorer(cfg)
	require.NoError(t, err)
	for rest := b; len(rest) > 0; {
		k := len(rest)
		if rng != nil && rng.IntN(2) == 0 {
			k = min(k, 1+rng.IntN(40))
		}
		n, err := r.Write(rest[:k])
		require.NoError(t, err)
		require.Equal(t, k, n)
		rest = rest[k:]
	}
	w, err := r.Wheel()
	require.NoError(t, err)
	return w
}

// requireSameWheels fails t unless a and b look the same through every
// read-only method; recvs must hold every receiver that has timers.
func requireSameWheels(t testing.TB, a, b *Wheel, recvs []uint64) {
	t.Helper()
	require.Equal(t, a.Now(), b.Now(), "Now")
	require.Equal(t, a.Len(), b.Len(), "Len")
	require.Equal(t, a.DataBytes(), b.DataBytes(), "DataBytes")
	requireSameNextEvent(t, a, b)
	total := 0
	for _, r := range recvs {
		require.Equal(t, a.ReceiverLen(r), b.ReceiverLen(r), "ReceiverLen(%d)", r)
		la, lb := a.List(r, nil), b.List(r, nil)
		require.Equal(t, la, lb, "List(%d)", r)
		total += len(la)
		for _, in := range la {
			ga, errA := a.Get(in.Key)
			gb, errB := b.Get(in.Key)
			require.NoError(t, errA)
			require.NoError(t, errB)
			require.Equal(t, ga, gb, "Get(%v)", in.Key)
		}
		var pa, pb []Info
		for from := uint64(0); ; {
			pa, pb = a.ListPage(r, from, 3, pa[:0]), b.ListPage(r, from, 3, pb[:0])
			require.Equal(t, pa, pb, "ListPage(%d, %d)", r, from)
			if len(pa) < 3 || pa[2].Tid == math.MaxUint64 {
				break
			}
			from = pa[2].Tid + 1
		}
	}
	require.Equal(t, a.Len(), total, "receivers missing from recvs")
}

// requireSameNextEvent compares a's and b's NextEvent if they have the same
// geometry: the ticks at which timers move down a level depend on it.
func requireSameNextEvent(t testing.TB, a, b *Wheel, msgAndArgs ...any) {
	t.Helper()
	if a.levels != b.levels || a.slots != b.slots {
		return
	}
	ta, oka := a.NextEvent()
	tb, okb := b.NextEvent()
	require.Equal(t, [2]any{ta, oka}, [2]any{tb, okb}, "NextEvent %s", fmt.Sprint(msgAndArgs...))
}

// richWheel returns a wheel with one timer of each kind: paused, with data
// inline and long, intervals past 2^32, a firing count past 2^32, due near
// 2^64, and timers due at Now() left by an Advance stopped at its max.
func richWheel(t testing.TB, cfg Config) *Wheel {
	w := newWheel(t, 1000, cfg)
	long := bytes.Repeat([]byte("0123456789"), 7)
	for _, a := range []struct {
		k Key
		s Spec
	}{
		{Key{1, 1}, Spec{After: 5, Repeat: 3}},
		{Key{1, 2}, Spec{After: 5, Data: []byte("inline")}},
		{Key{2, 3}, Spec{After: 5, Every: 1 << 40, Data: long}},
		{Key{2, 4}, Spec{After: 5}},
		{Key{0, 0}, Spec{At: math.MaxUint64}},
		{Key{math.MaxUint64, math.MaxUint64}, Spec{After: 50, Every: 2}},
		{Key{3, 7}, Spec{After: 1 << 33, Data: long[:17]}},
		{Key{3, 8}, Spec{After: 20, Repeat: math.MaxUint32}},
		{Key{3, 9}, Spec{After: 30, Every: 1}},
	} {
		require.NoError(t, w.Add(a.k, a.s))
	}
	require.NoError(t, w.Pause(Key{3, 9}))
	require.NoError(t, w.Pause(Key{1, 2}))
	fired, done := w.Advance(1005, 2, nil) // two of the four due at 1005
	require.Equal(t, 2, fired)
	require.False(t, done)
	_, err := w.AddFrom(Key{4, 1}, Spec{After: 3, Data: []byte{0}}, 1010)
	require.NoError(t, err)
	return w
}

var richRecvs = []uint64{0, 1, 2, 3, 4, math.MaxUint64}

// TestSnapshotRoundTrip: a restored wheel, in its own geometry or another,
// looks the same, encodes to the same bytes, and fires the same.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, cfg := range []Config{{}, {Levels: 2, Slots: 4}, {Levels: 1, Slots: 2}, {Levels: 8, Slots: 256}} {
		a := richWheel(t, Config{})
		snap := snapshotOf(t, a, 0)
		b := restoreOf(t, cfg, snap, rand.New(rand.NewPCG(1, 2)))
		requireSameWheels(t, a, b, richRecvs)
		require.Equal(t, snap, snapshotOf(t, b, 7), "re-snapshot: the slab in the snapshot's order, the seq numbers kept")

		// The fired count past 2^32 survives.
		a.Advance(1050, 0, nil)
		b.Advance(1050, 0, nil)
		snap = snapshotOf(t, a, 0)
		c := restoreOf(t, cfg, snap, nil)
		for _, w := range []*Wheel{a, b, c} {
			w.nodes.at(w.index.find(Key{math.MaxUint64, math.MaxUint64})).fired = math.MaxUint32 - 1
		}
		fa := collect(a, 1060)
		require.Equal(t, fa, collect(b, 1060))
		require.Equal(t, fa, collect(c, 1060))
		snap = snapshotOf(t, a, 0)
		d := restoreOf(t, cfg, snap, nil)
		in, err := d.Get(Key{math.MaxUint64, math.MaxUint64})
		require.NoError(t, err)
		require.Greater(t, in.Fired, uint64(math.MaxUint32))
		requireSameWheels(t, a, d, richRecvs)

		// All four are the same: drive them alike.
		ws := []*Wheel{a, b, c, d}
		step := func(op func(w *Wheel) any) {
			want := op(a)
			for _, w := range ws[1:] {
				require.Equal(t, want, op(w))
			}
		}
		for _, k := range []Key{{3, 9}, {1, 2}} {
			step(func(w *Wheel) any { return w.Resume(k) })
			step(func(w *Wheel) any { return collect(w, w.Now()+2) })
			step(func(w *Wheel) any { return w.Pause(k) })
		}
		// A timer added next comes after the restored ones on its tick.
		step(func(w *Wheel) any { return w.Add(Key{9, 9}, Spec{At: 1100, Repeat: 1}) })
		step(func(w *Wheel) any { return w.Add(Key{9, 8}, Spec{At: 1100, Repeat: 1}) })
		step(func(w *Wheel) any { return w.Resume(Key{3, 9}) })
		step(func(w *Wheel) any { return collect(w, 1200) })
		for _, w := range ws[1:] {
			requireSameWheels(t, a, w, append(richRecvs, 9))
			requireSameState(t, snapshotOf(t, a, 0), snapshotOf(t, w, 0))
		}
	}
}

// TestSnapshotEmpty: an empty wheel, at any tick.
func TestSnapshotEmpty(t *testing.T) {
	for _, now := range []uint64{0, 1, math.MaxUint64} {
		w := newWheel(t, now, Config{})
		snap := snapshotOf(t, w, 1)
		assert.Len(t, snap, 4+1+binaryLen(now)+1+4)
		r := restoreOf(t, Config{}, snap, nil)
		assert.Equal(t, now, r.Now())
		assert.Zero(t, r.Len())
		_, ok := r.NextEvent()
		assert.False(t, ok)
	}
}

func binaryLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// TestSnapshotSameState: wheels with the same timers give snapshots of
// the same state, whatever their geometry, slab layout, history or
// add-sequence numbers (the bytes differ: records in slab order, with
// their seq).
func TestSnapshotSameState(t *testing.T) {
	build := func(cfg Config, churn bool, seqMax uint32) *Wheel {
		w := newWheel(t, 500, cfg)
		if seqMax != 0 {
			w.seqMax = seqMax
		}
		if churn { // nodes and extras freed in the middle of the slab
			for i := range uint64(300) {
				require.NoError(t, w.Add(Key{7, i}, Spec{After: 1 + i, Data: make([]byte, i%40)}))
			}
		}
		for i := range uint64(200) {
			require.NoError(t, w.Add(Key{i % 3, i}, Spec{After: 1 + i%17, Every: i % 5, Data: bytes.Repeat([]byte{byte(i)}, int(i%30))}))
			if churn && i%2 == 0 {
				w.CancelAll(7)
			}
		}
		return w
	}
	want := snapshotOf(t, build(Config{}, false, 0), 0)
	for _, w := range []*Wheel{
		build(Config{Levels: 2, Slots: 4}, false, 0),
		build(Config{}, true, 0),
		build(Config{Levels: 3, Slots: 3}, true, 0),
		build(Config{}, true, 40), // renumbered many times
	} {
		requireSameState(t, want, snapshotOf(t, w, 100))
	}
}

// TestFrozenAfterRenumber: the Frozen keeps the order the timers had at
// Freeze when the wheel renumbers them afterwards.
func TestFrozenAfterRenumber(t *testing.T) {
	w := newWheel(t, 0, Config{})
	w.seqMax = 10
	for i := range uint64(8) {
		require.NoError(t, w.Add(Key{1, i}, Spec{After: 5}))
	}
	require.NoError(t, w.Cancel(Key{1, 0}))
	f := w.Freeze()
	defer f.Release()
	want := snapshotOf(t, w, 0)
	for i := range uint64(30) { // renumbers the live timers
		require.NoError(t, w.Add(Key{2, i}, Spec{After: 5}))
		require.NoError(t, w.Cancel(Key{2, i}))
	}
	require.Less(t, w.nodes.at(w.index.find(Key{1, 7})).order(), uint32(10))
	requireSameState(t, want, f.Encode(nil))
}

// TestFreezeConcurrent: one goroutine encodes a Frozen while the wheel's
// owner adds, cancels, replaces, pauses and fires timers with data of all
// sizes (and freezes again); the snapshot decodes to the state of a Frozen
// taken at the same point and encoded while the wheel was stopped. Run it
// with -race.
func TestFreezeConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := newWheel(t, 0, Config{})
	data := func() []byte { return bytes.Repeat([]byte{byte(rng.Uint32())}, rng.IntN(3)*rng.IntN(100)) }
	mutate := func(n int) {
		for range n {
			k := Key{rng.Uint64N(10), rng.Uint64N(500)}
			switch rng.IntN(6) {
			case 0, 1:
				_ = w.Add(k, Spec{After: 1 + rng.Uint64N(50), Data: data(), Replace: rng.IntN(2) == 0})
			case 2:
				_ = w.Cancel(k)
			case 3:
				_ = w.Pause(k)
				_ = w.Resume(Key{k.Receiver, rng.Uint64N(500)})
			case 4:
				w.Advance(w.Now()+rng.Uint64N(5), 0, func(f *Fire) {
					if len(f.Data) > 0 { // a callback's add may reuse freed buffers
						_ = w.Add(Key{f.Receiver, f.Tid + 1}, Spec{After: 3, Data: data(), Replace: true})
					}
				})
			default:
				w.CancelAll(k.Receiver)
			}
		}
	}
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for range rounds {
		mutate(3000)
		f1, f2 := w.Freeze(), w.Freeze()
		want := f2.Encode(nil) // the wheel is stopped
		f2.Release()
		var got []byte
		var wg sync.WaitGroup
		wg.Go(func() {
			for done := false; !done; {
				got, done = f1.AppendNext(got, 1+rng2(len(got)))
			}
			f1.Release()
		})
		mutate(3000)
		f3 := w.Freeze() // another, while f1 is read
		mutate(1000)
		wg.Wait()
		requireSameState(t, want, got)
		f3.Release()
	}
}

// rng2 is a pseudo-random piece size for the encoding goroutine (which
// must not share TestFreezeConcurrent's rng).
func rng2(x int) int { return (x*2654435761 + 12345) % 5000 }

// TestFrozenRelease: Freeze allocates a fixed number of objects, data buffers are recycled again once no Frozen is live, a second
// Release does nothing and a released Frozen panics.
func TestFrozenRelease(t *testing.T) {
	w := newWheel(t, 0, Config{})
	long := make([]byte, 40)
	for i := range uint64(5000) {
		require.NoError(t, w.Add(Key{1, i}, Spec{After: 10, Data: long}))
	}
	f := w.Freeze()
	f.Encode(nil)
	f.Release()
	f.Release()
	assert.Panics(t, func() { f.AppendNext(nil, 0) })
	assert.Zero(t, w.frz.pins.Load())
	if !raceEnabled {
		allocs := testing.AllocsPerRun(10, func() { w.Freeze().Release() })
		assert.LessOrEqual(t, allocs, 10.0, "Freeze copies no timers (allocs: the Frozen, its state, its cleanup, the two page lists, the first block's refs, the payload index, the barrier and its claims)")
	}
	// Pinned: a freed buffer is not pooled, so not reused.
	f = w.Freeze()
	pooled := len(w.extra.pool[sizeClass(len(long))])
	require.NoError(t, w.Cancel(Key{1, 0}))
	assert.Equal(t, pooled, len(w.extra.pool[sizeClass(len(long))]))
	f.Release()
	require.NoError(t, w.Cancel(Key{1, 1}))
	assert.Equal(t, pooled+1, len(w.extra.pool[sizeClass(len(long))]))
}

// TestAppendNextPieces: pieces of any max concatenate to Encode's bytes
// (the wheel does not change: nothing is encoded by it) and each stops
// once max bytes are reached.
func TestAppendNextPieces(t *testing.T) {
	w := richWheel(t, Config{})
	f := w.Freeze()
	want := f.Encode(nil)
	f.Release()
	for max := range 80 {
		f := w.Freeze()
		var got []byte
		for done := false; !done; {
			before := len(got)
			got, done = f.AppendNext(got, max)
			if max > 0 && len(got)-before > max {
				// Only the last part may pass max: it began below it (a
				// page's records; one of richWheel is at most 62 bytes
				// plus 70 of data).
				require.Less(t, len(got)-before-max, pageLen*132, "max %d", max)
			}
		}
		f.Release()
		require.Equal(t, want, got, "max %d", max)
	}
}
