package wheel

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newWheel(t testing.TB, start uint64, cfg Config) *Wheel {
	t.Helper()
	w, err := New(start, cfg)
	require.NoError(t, err)
	return w
}

// collect advances w to `to` with no limit and returns the firings.
func collect(w *Wheel, to uint64) []Fire {
	var got []Fire
	_, done := w.Advance(to, 0, func(f *Fire) {
		c := *f
		c.Data = append([]byte(nil), f.Data...)
		got = append(got, c)
	})
	if !done {
		panic("unbounded Advance not done")
	}
	return got
}

// TestSeedExample reproduces the firing table of the design document: 1 tick
// per second, tid 12 every tick ×5, tid 11 every 3 ticks ×4, tid 20 every 3
// ticks forever, advanced one tick at a time. (The design document fired
// T+3 in add order, 11, 12, 20; the same-tick order is now in rounds by
// receiver, fair.go.)
func TestSeedExample(t *testing.T) {
	const T = 1587848614
	w := newWheel(t, T, Config{})
	require.NoError(t, w.Add(Key{1, 11}, Spec{After: 3, Repeat: 4}))
	require.NoError(t, w.Add(Key{1, 12}, Spec{After: 1, Repeat: 5}))
	require.NoError(t, w.Add(Key{2, 20}, Spec{After: 3}))

	var lines []string
	for tick := uint64(T + 1); tick <= T+17; tick++ {
		for _, f := range collect(w, tick) {
			lines = append(lines, fmt.Sprintf("T+%d tid=%d fired=%d last=%v", f.Tick-T, f.Tid, f.Fired, f.Last))
		}
	}
	assert.Equal(t, []string{
		"T+1 tid=12 fired=1 last=false",
		"T+2 tid=12 fired=2 last=false",
		// Rounds by receiver: receiver 1's first, receiver 2's, receiver 1's second.
		"T+3 tid=11 fired=1 last=false",
		"T+3 tid=20 fired=1 last=false",
		"T+3 tid=12 fired=3 last=false",
		"T+4 tid=12 fired=4 last=false",
		"T+5 tid=12 fired=5 last=true",
		"T+6 tid=11 fired=2 last=false",
		"T+6 tid=20 fired=2 last=false",
		"T+9 tid=11 fired=3 last=false",
		"T+9 tid=20 fired=3 last=false",
		"T+12 tid=11 fired=4 last=true",
		"T+12 tid=20 fired=4 last=false",
		"T+15 tid=20 fired=5 last=false",
	}, lines)
	assert.Equal(t, 1, w.Len())
	_, err := w.Get(Key{1, 11})
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestCatchUp: one Advance across many periods yields every firing, each with its own tick.
func TestCatchUp(t *testing.T) {
	w := newWheel(t, 1000, Config{})
	require.NoError(t, w.Add(Key{1, 1}, Spec{After: 7, Repeat: 0}))
	got := collect(w, 1000+7*50)
	require.Len(t, got, 50)
	for j, f := range got {
		assert.Equal(t, uint64(1000+7*(j+1)), f.Tick)
		assert.Equal(t, uint64(j+1), f.Fired)
	}
	assert.Equal(t, uint64(1350), w.Now())
	assert.Empty(t, collect(w, 10), "advancing backwards is a no-op")
	assert.Equal(t, uint64(1350), w.Now())
}

func TestAddErrors(t *testing.T) {
	const now = 100
	tests := []struct {
		name string
		spec Spec
		want error
	}{
		{"after zero", Spec{}, ErrZeroAfter},
		{"at now", Spec{At: now}, ErrPast},
		{"at past", Spec{At: now - 1}, ErrPast},
		{"overflow", Spec{After: math.MaxUint64 - now + 1}, ErrOverflow},
		{"max due", Spec{After: math.MaxUint64 - now}, nil},
		{"at max", Spec{At: math.MaxUint64}, nil},
		{"after one", Spec{After: 1}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWheel(t, now, Config{})
			err := w.Add(Key{1, 1}, tc.spec)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, 1, w.Len())
				return
			}
			assert.ErrorIs(t, err, tc.want)
			assert.Equal(t, 0, w.Len())
		})
	}
}

func TestDuplicateAndReplace(t *testing.T) {
	w := newWheel(t, 0, Config{})
	k := Key{7, 1}
	require.NoError(t, w.Add(k, Spec{After: 10, Data: []byte("old")}))
	assert.ErrorIs(t, w.Add(k, Spec{After: 5}), ErrExists)
	in, err := w.Get(k)
	require.NoError(t, err)
	assert.Equal(t, uint64(10), in.Due, "a refused duplicate leaves the timer alone")

	collect(w, 0)
	require.NoError(t, w.Add(Key{7, 2}, Spec{After: 5}))
	require.NoError(t, w.Add(k, Spec{After: 5, Repeat: 2, Replace: true}))
	in, err = w.Get(k)
	require.NoError(t, err)
	assert.Equal(t, Info{Key: k, Due: 5, Remaining: 5, Every: 5, Repeat: 2}, in, "replace takes nothing from the old timer")
	got := collect(w, 5)
	require.Len(t, got, 2)
	assert.Equal(t, uint64(2), got[0].Tid, "the replaced timer goes behind timers added before the replace")
	assert.Equal(t, uint64(1), got[1].Tid)
}

func TestUnknownKey(t *testing.T) {
	w := newWheel(t, 0, Config{})
	k := Key{1, 2}
	assert.ErrorIs(t, w.Cancel(k), ErrNotFound)
	assert.ErrorIs(t, w.Pause(k), ErrNotFound)
	assert.ErrorIs(t, w.Resume(k), ErrNotFound)
	_, err := w.Get(k)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Equal(t, 0, w.CancelAll(1))
	assert.Empty(t, w.List(1, nil))
}

func TestPauseResume(t *testing.T) {
	w := newWheel(t, 0, Config{})
	k := Key{1, 1}
	require.NoError(t, w.Add(k, Spec{After: 10, Every: 4, Repeat: 3}))
	assert.ErrorIs(t, w.Resume(k), ErrNotPaused, "resume of a timer that is not paused")
	collect(w, 6)
	require.NoError(t, w.Pause(k))
	assert.ErrorIs(t, w.Pause(k), ErrPaused)
	in, _ := w.Get(k)
	assert.True(t, in.Paused)
	assert.Equal(t, uint64(4), in.Remaining)

	assert.Empty(t, collect(w, 500), "a paused timer does not fire")
	in, _ = w.Get(k)
	assert.Equal(t, uint64(4), in.Remaining, "remaining ticks stay frozen")
	assert.Equal(t, uint64(504), in.Due)

	require.NoError(t, w.Resume(k))
	got := collect(w, 1000)
	require.Len(t, got, 3)
	assert.Equal(t, []uint64{504, 508, 512}, []uint64{got[0].Tick, got[1].Tick, got[2].Tick})
	assert.True(t, got[2].Last)
}

func TestResumeOverflow(t *testing.T) {
	w := newWheel(t, 0, Config{})
	k := Key{1, 1}
	require.NoError(t, w.Add(k, Spec{At: math.MaxUint64}))
	require.NoError(t, w.Pause(k))
	collect(w, 10)
	assert.ErrorIs(t, w.Resume(k), ErrOverflow)
	in, err := w.Get(k)
	require.NoError(t, err)
	assert.True(t, in.Paused, "the timer stays paused")
}

// TestLastAtMaxTick: a repeating timer whose next due would pass 2^64-1 fires
// its last time instead of wrapping.
func TestLastAtMaxTick(t *testing.T) {
	w := newWheel(t, math.MaxUint64-25, Config{})
	require.NoError(t, w.Add(Key{1, 1}, Spec{After: 10}))
	got := collect(w, math.MaxUint64)
	require.Len(t, got, 2)
	assert.Equal(t, uint64(math.MaxUint64-15), got[0].Tick)
	assert.Equal(t, uint64(math.MaxUint64-5), got[1].Tick)
	assert.True(t, got[1].Last)
	assert.Equal(t, 0, w.Len())
	assert.Equal(t, uint64(math.MaxUint64), w.Now())
}

func TestCallbackMutations(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for tid := uint64(1); tid <= 4; tid++ {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: 5, Repeat: 0}))
	}
	var got []uint64
	collect(w, 0)
	_, done := w.Advance(5, 0, func(f *Fire) {
		got = append(got, f.Tid)
		switch f.Tid {
		case 1: // cancel a timer due on this same tick, not yet fired
			require.NoError(t, w.Cancel(Key{1, 3}))
			// and itself
			require.NoError(t, w.Cancel(Key{1, 1}))
		case 2: // pause another due on this tick
			require.NoError(t, w.Pause(Key{1, 4}))
			// add one that falls due within this Advance? after >= 1, so at tick 6: not here
			require.NoError(t, w.Add(Key{1, 9}, Spec{After: 1, Repeat: 1}))
		}
	})
	assert.True(t, done)
	assert.Equal(t, []uint64{1, 2}, got)
	_, err := w.Get(Key{1, 1})
	assert.ErrorIs(t, err, ErrNotFound, "cancel of the firing timer removes its re-armed self")

	// A timer added in a callback fires in the same Advance when due by `to`.
	got = got[:0]
	w.Advance(20, 0, func(f *Fire) {
		got = append(got, f.Tid)
		if f.Tid == 9 && f.Tick == 6 {
			// 4 was paused while due at tick 5 with 0 ticks left: it is due at once.
			require.NoError(t, w.Resume(Key{1, 4}))
			require.NoError(t, w.Add(Key{1, 9}, Spec{After: 2, Repeat: 1})) // re-add its own key after the last firing
		}
	})
	// tick 6: 9 then the resumed 4; 8: 9 again; 10: 2; 11: 4; 15: 2; 16: 4; 20: 2
	assert.Equal(t, []uint64{9, 4, 9, 2, 4, 2, 4, 2}, got)
}

func TestFireDataSurvivesCallbackMutation(t *testing.T) {
	w := newWheel(t, 0, Config{})
	require.NoError(t, w.Add(Key{1, 1}, Spec{After: 1, Repeat: 1, Data: []byte("payload-one")}))
	w.Advance(1, 0, func(f *Fire) {
		// Reusing the freed buffer must not change f.Data during the callback.
		require.NoError(t, w.Add(Key{1, 2}, Spec{After: 1, Data: []byte("XXXXXXXXXXX")}))
		assert.Equal(t, "payload-one", string(f.Data))
	})
	in, err := w.Get(Key{1, 2})
	require.NoError(t, err)
	assert.Equal(t, "XXXXXXXXXXX", string(in.Data))
}

func TestListAndCancelAll(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for tid := uint64(5); tid >= 1; tid-- {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: tid * 100}))
	}
	require.NoError(t, w.Add(Key{2, 1}, Spec{After: 3, Repeat: 1}))
	var tids []uint64
	for _, in := range w.List(1, nil) {
		tids = append(tids, in.Tid)
	}
	assert.Equal(t, []uint64{5, 4, 3, 2, 1}, tids, "oldest added first")
	assert.Equal(t, 5, w.ReceiverLen(1))
	assert.Equal(t, 5, w.CancelAll(1))
	assert.Equal(t, 0, w.ReceiverLen(1))
	assert.Equal(t, 1, w.Len())
	assert.Len(t, collect(w, 1000), 1)
}

func TestBigIntervalAndData(t *testing.T) {
	w := newWheel(t, 0, Config{})
	const big = 1 << 40
	require.NoError(t, w.Add(Key{3, 3}, Spec{After: 1, Every: big, Repeat: 3, Data: []byte{1, 2, 3}}))
	got := collect(w, 3*big)
	require.Len(t, got, 3)
	assert.Equal(t, []uint64{1, 1 + big, 1 + 2*big}, []uint64{got[0].Tick, got[1].Tick, got[2].Tick})
	assert.Equal(t, []byte{1, 2, 3}, got[2].Data)
}

func TestFiredCountPast32Bits(t *testing.T) {
	w := newWheel(t, 0, Config{})
	k := Key{1, 1}
	require.NoError(t, w.Add(k, Spec{After: 1}))
	i := w.index.find(k)
	w.nodes.at(i).fired = math.MaxUint32 - 1
	got := collect(w, 3)
	require.Len(t, got, 3)
	assert.Equal(t, []uint64{math.MaxUint32, 1 << 32, 1<<32 + 1}, []uint64{got[0].Fired, got[1].Fired, got[2].Fired})
	in, _ := w.Get(k)
	assert.Equal(t, uint64(1<<32+1), in.Fired)
}

func TestRenumberKeepsOrder(t *testing.T) {
	w := newWheel(t, 0, Config{})
	w.seqMax = 8
	// Keep 3 live timers due together while adding and cancelling many others.
	for tid := uint64(1); tid <= 3; tid++ {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: 50}))
	}
	for j := uint64(0); j < 40; j++ {
		require.NoError(t, w.Add(Key{2, j}, Spec{After: 10}))
		require.NoError(t, w.Cancel(Key{2, j}))
	}
	require.NoError(t, w.Add(Key{1, 0}, Spec{After: 50}))
	var tids []uint64
	for _, f := range collect(w, 50) {
		tids = append(tids, f.Tid)
	}
	assert.Equal(t, []uint64{1, 2, 3, 0}, tids)
}

func TestBoundedAdvance(t *testing.T) {
	w := newWheel(t, 0, Config{})
	for tid := uint64(0); tid < 10; tid++ {
		require.NoError(t, w.Add(Key{1, tid}, Spec{After: 5 + tid/4, Repeat: 1}))
	}
	var tids []uint64
	fn := func(f *Fire) { tids = append(tids, f.Tid) }
	n, done := w.Advance(100, 3, fn)
	assert.Equal(t, 3, n)
	assert.False(t, done)
	assert.Equal(t, uint64(5), w.Now(), "stopped part way through tick 5")
	n, done = w.Advance(100, 3, fn)
	assert.Equal(t, 3, n)
	assert.False(t, done)
	assert.Equal(t, uint64(6), w.Now())
	n, done = w.Advance(100, 0, fn)
	assert.Equal(t, 4, n)
	assert.True(t, done)
	assert.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, tids)
	assert.Equal(t, uint64(100), w.Now())
}

// TestSkipsEmptyTime: a far jump visits occupied slots only.
func TestSkipsEmptyTime(t *testing.T) {
	w := newWheel(t, 0, Config{})
	require.NoError(t, w.Add(Key{1, 1}, Spec{At: 1 << 62, Repeat: 1}))
	got := collect(w, math.MaxUint64)
	require.Len(t, got, 1)
	assert.Equal(t, uint64(1<<62), got[0].Tick)
}

func TestConfig(t *testing.T) {
	for _, cfg := range []Config{{Levels: -1}, {Levels: 17}, {Slots: 1}, {Slots: 257}} {
		_, err := New(0, cfg)
		assert.Error(t, err, "%+v", cfg)
	}
	w := newWheel(t, 0, Config{Levels: 2, Slots: 4})
	require.NoError(t, w.Add(Key{1, 1}, Spec{After: 1000}), "beyond the top level waits in overflow")
	got := collect(w, 2000)
	require.Len(t, got, 2)
	assert.Equal(t, uint64(1000), got[0].Tick)
	assert.Equal(t, uint64(2000), got[1].Tick)
}

// TestBoundedAdvanceStop: a bounded Advance reports done == false exactly when
// more is due by `to`, whatever cascades the wheel does internally.
func TestBoundedAdvanceStop(t *testing.T) {
	for _, tc := range []struct {
		second   uint64
		wantDone bool
		wantNow  uint64
	}{
		{second: 250, wantDone: true, wantNow: 150}, // nothing else due by 150
		{second: 105, wantDone: false, wantNow: 105},
	} {
		w := newWheel(t, 0, Config{})
		require.NoError(t, w.Add(Key{1, 1}, Spec{After: 5, Repeat: 1}))
		require.NoError(t, w.Add(Key{1, 2}, Spec{After: tc.second, Repeat: 1}))
		n, done := w.Advance(150, 1, nil)
		assert.Equal(t, 1, n)
		assert.Equal(t, tc.wantDone, done, "second due %d", tc.second)
		assert.Equal(t, tc.wantNow, w.Now(), "second due %d", tc.second)
	}
}

// TestOverflowJump: on a tiny wheel, a far timer in the overflow list does not
// make Advance walk every turn of the top level.
func TestOverflowJump(t *testing.T) {
	w := newWheel(t, 0, Config{Levels: 2, Slots: 4})
	require.NoError(t, w.Add(Key{1, 1}, Spec{At: math.MaxUint64 - 3, Repeat: 1}))
	got := collect(w, math.MaxUint64) // 2^60 turns of the top level if walked
	require.Len(t, got, 1)
	assert.Equal(t, uint64(math.MaxUint64-3), got[0].Tick)
}

func TestNextEvent(t *testing.T) {
	w := newWheel(t, 1000, Config{})
	_, ok := w.NextEvent()
	assert.False(t, ok, "empty wheel")
	require.NoError(t, w.Add(Key{1, 1}, Spec{After: 50, Repeat: 1}))
	require.NoError(t, w.Add(Key{1, 2}, Spec{After: 50, Repeat: 1}))
	tick, ok := w.NextEvent()
	assert.True(t, ok)
	assert.Equal(t, uint64(1050), tick)
	collect(w, 1049)
	tick, _ = w.NextEvent()
	assert.Equal(t, uint64(1050), tick, "nothing fired before it")
	n, done := w.Advance(2000, 1, nil)
	assert.Equal(t, 1, n)
	assert.False(t, done)
	tick, ok = w.NextEvent()
	assert.True(t, ok)
	assert.Equal(t, uint64(1050), tick, "the second timer is still due at Now()")
	collect(w, 2000)
	_, ok = w.NextEvent()
	assert.False(t, ok)

	// A far timer: the next event may be a cascade before its due tick, never after.
	require.NoError(t, w.Add(Key{1, 3}, Spec{After: 123456, Repeat: 1}))
	for {
		tick, ok := w.NextEvent()
		require.True(t, ok)
		require.LessOrEqual(t, tick, uint64(2000+123456))
		if fired := collect(w, tick); len(fired) == 1 {
			assert.Equal(t, uint64(2000+123456), fired[0].Tick)
			break
		}
	}
}

// TestLargeBurst: a burst of one-shot timers due on one tick, in a wheel
// whose index is large enough for Advance to prefetch (prefetchMin), fires
// every live timer once, each receiver's in add order, and empties the index. The callback
// cancels some timers still pending and re-adds others, and a repeating
// timer is mixed in, so prefetching stale or non-last entries is exercised.
func TestLargeBurst(t *testing.T) {
	const n = prefetchMin // > 3/4 of prefetchMin entries: the index has grown past it
	w := newWheel(t, 0, Config{})
	for i := range uint64(n) {
		spec := Spec{After: 1, Repeat: 1}
		if i%1000 == 0 {
			spec = Spec{After: 1, Every: 5, Repeat: 2}
		}
		require.NoError(t, w.Add(Key{i % 97, i}, spec))
	}
	require.GreaterOrEqual(t, int(w.index.table.len()), prefetchMin)
	next := map[uint64]uint64{} // per receiver: the least tid not fired yet
	cancelled := map[uint64]bool{}
	fired, done := w.Advance(1, 0, func(f *Fire) {
		r := f.Receiver
		if _, ok := next[r]; !ok {
			next[r] = r
		}
		for next[r] < f.Tid && cancelled[next[r]] {
			next[r] += 97
		}
		require.Equal(t, next[r], f.Tid, "receiver %d's in add order", r)
		next[r] += 97
		if f.Tid%10 == 3 && f.Tid+5 < n {
			k := Key{(f.Tid + 5) % 97, f.Tid + 5}
			require.NoError(t, w.Cancel(k))
			cancelled[k.Tid] = true
		}
		if f.Tid%10 == 4 { // re-add the key that just fired, for later
			require.NoError(t, w.Add(f.Key, Spec{After: 3, Repeat: 1}))
		}
	})
	require.True(t, done)
	assert.Equal(t, n-len(cancelled), fired)
	wantLeft := 0 // the repeating ones, and the re-added
	for i := range n {
		if i%1000 == 0 || i%10 == 4 {
			wantLeft++
		}
	}
	assert.Equal(t, wantLeft, w.Len())
	left, _ := w.Advance(10, 0, nil)
	assert.Equal(t, 0, w.Len())
	assert.Equal(t, wantLeft, left)
	assert.Zero(t, w.index.count)
}
