package wheel

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// digestOf is w's state digest: the digest mode's output and its sum.
func digestOf(t testing.TB, w *Wheel) ([]byte, uint64) {
	t.Helper()
	f := w.Freeze()
	defer f.Release()
	var sum uint64
	f.SetDigest(&sum)
	return f.Encode(nil), sum
}

// Two wheels in the same state with their timers laid out in another
// order (one restored from the other's snapshot, which leaves out the
// holes, then both added the same timer: the first into its hole) have
// different snapshots but the same digest; a wheel whose timer fires one
// tick later, or that has one timer more, has another digest.
func TestDigestIgnoresLayout(t *testing.T) {
	a := newWheel(t, 1000, Config{})
	for tid := uint64(1); tid <= 40; tid++ {
		require.NoError(t, a.Add(Key{Receiver: tid % 3, Tid: tid}, Spec{After: 5 + tid, Every: tid % 2 * 7, Data: []byte{byte(tid)}}))
	}
	for _, tid := range []uint64{3, 17, 29} {
		require.NoError(t, a.Cancel(Key{Receiver: tid % 3, Tid: tid}))
	}
	b := restoreOf(t, Config{Levels: 3, Slots: 16}, snapshotOf(t, a, 0), nil)
	for _, w := range []*Wheel{a, b} {
		require.NoError(t, w.Add(Key{Receiver: 9, Tid: 100}, Spec{After: 3}))
		w.Advance(1006, 0, func(*Fire) {}) // fires and re-arms some: writes nodes
	}
	require.False(t, bytes.Equal(snapshotOf(t, a, 0), snapshotOf(t, b, 0)), "the layouts differ (else this test shows nothing)")
	outA, sumA := digestOf(t, a)
	outB, sumB := digestOf(t, b)
	require.Equal(t, outA, outB)
	require.Equal(t, sumA, sumB)

	c := restoreOf(t, Config{}, snapshotOf(t, a, 0), nil)
	require.NoError(t, c.Add(Key{Receiver: 9, Tid: 101}, Spec{After: 50}))
	outC, sumC := digestOf(t, c)
	require.False(t, bytes.Equal(outA, outC) && sumA == sumC, "one timer more")

	d := restoreOf(t, Config{}, snapshotOf(t, a, 0), nil)
	require.NoError(t, d.Add(Key{Receiver: 9, Tid: 100}, Spec{After: 4, Replace: true}))
	e := restoreOf(t, Config{}, snapshotOf(t, a, 0), nil)
	require.NoError(t, e.Add(Key{Receiver: 9, Tid: 100}, Spec{After: 5, Replace: true}))
	_, sumD := digestOf(t, d)
	_, sumE := digestOf(t, e)
	require.NotEqual(t, sumD, sumE, "one timer due a tick later")
}

// A digest taken while the owner writes between its pieces (the write
// barrier saves nodes, encoded out of slab order) is the digest of the
// state at the Freeze.
func TestDigestWhileWriting(t *testing.T) {
	a := newWheel(t, 1000, Config{})
	for tid := uint64(1); tid <= 3000; tid++ {
		require.NoError(t, a.Add(Key{Receiver: tid % 7, Tid: tid}, Spec{After: 1 + tid%50, Every: 1 + tid%5}))
	}
	at := restoreOf(t, Config{}, snapshotOf(t, a, 0), nil) // the state at the Freeze below
	_, want := digestOf(t, at)
	wantOut, _ := digestOf(t, at)
	f := a.Freeze()
	defer f.Release()
	var sum uint64
	f.SetDigest(&sum)
	var out []byte
	now := uint64(1000)
	pieces := 0
	for done := false; !done; pieces++ {
		out, done = f.AppendNext(out, 64)
		now++
		a.Advance(now, 0, func(*Fire) {}) // re-arms repeating timers: writes their nodes
		require.NoError(t, a.Add(Key{Receiver: 8, Tid: now}, Spec{After: 100}))
	}
	require.Greater(t, pieces, 20, "the owner wrote between pieces")
	require.Equal(t, want, sum)
	require.Equal(t, wantOut, out)
}
