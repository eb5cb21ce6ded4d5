package session

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/wheel"
)

// TestRestoreWheelIndexAside: restoreWheel, which builds the index on a
// second goroutine when it has two CPUs, restores a wheel of many pieces
// to the same wheel as wheel.Restore, with one CPU or two, and refuses a
// corrupt one (cut in the middle, or with a key twice) with an error,
// leaving no goroutine behind.
func TestRestoreWheelIndexAside(t *testing.T) {
	w, err := wheel.New(100, wheel.Config{})
	require.NoError(t, err)
	const n = 120_000 // about 4 pieces of restorePiece
	for i := range n {
		require.NoError(t, w.Add(wheel.Key{Receiver: uint64(i % 97), Tid: uint64(i)}, wheel.Spec{After: uint64(1 + i%5000)}))
	}
	f := w.Freeze()
	snap := f.Encode(nil)
	f.Release()
	require.Greater(t, len(snap), 3*restorePiece)
	want, err := wheel.Restore(wheel.Config{}, snap)
	require.NoError(t, err)
	encode := func(w *wheel.Wheel) []byte {
		f := w.Freeze()
		defer f.Release()
		return f.Encode(nil)
	}
	goroutines := runtime.NumGoroutine()
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		got, err := restoreWheel(snap)
		runtime.GOMAXPROCS(prev)
		require.NoError(t, err, "GOMAXPROCS %d", procs)
		require.Equal(t, want.Len(), got.Len())
		require.Equal(t, encode(want), encode(got), "GOMAXPROCS %d", procs)
		in, err := got.Get(wheel.Key{Receiver: 5, Tid: 5})
		require.NoError(t, err)
		require.Equal(t, uint64(6), in.Due-got.Now())
	}
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	_, err = restoreWheel(snap[:len(snap)-restorePiece/2])
	require.ErrorIs(t, err, wheel.ErrSnapshot)
	bad := append([]byte(nil), snap...)
	bad[len(bad)/2] ^= 0x40 // a flipped bit: the checksum fails, or a record does
	_, err = restoreWheel(bad)
	require.ErrorIs(t, err, wheel.ErrSnapshot)
	require.Equal(t, goroutines, runtime.NumGoroutine(), "goroutines left")
}
