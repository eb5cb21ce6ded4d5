package wheel

import (
	"runtime/metrics"
	"testing"
)

// TestFreezeAllocatesNoClaimWords checks that a Freeze of a big wheel
// allocates no claim words (4 bytes per node page): the slab grows a
// spare claim set as it grows, so the first Freeze after a start (or a
// restore) does not make and zero 25 MB in the loop's pause at 100M
// timers (15 ms, docs/BENCHMARKS.md, "Loop pauses and lateness at 100M"),
// nor does a Freeze after the wheel grew while the last snapshot was
// written.
func TestFreezeAllocatesNoClaimWords(t *testing.T) {
	if testing.Short() {
		t.Skip("adds 300k timers")
	}
	const n = 300_000
	w := newWheel(t, 0, Config{})
	tid := uint64(0)
	add := func(k int) {
		for range k {
			tid++
			if err := w.Add(Key{tid % 1000, tid}, Spec{After: 1_000_000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	freeze := func(what string) *Frozen {
		before := allocated()
		f := w.Freeze()
		// Claim words for n timers: n/16 pages × 4 bytes = n/4 bytes. The
		// runtime counts small allocations a span at a time (its cache's
		// refills), so the Frozen's own few objects show as 0 or ~16 KB:
		// the bound is half the claim words of n timers.
		if got := allocated() - before; got > n/8 {
			t.Errorf("%s of %d timers allocated %d bytes, want under %d (no claim words: %d bytes)", what, w.Len(), got, n/8, w.Len()/4)
		}
		return f
	}
	add(n)
	f := freeze("the first Freeze")
	for done := false; !done; {
		_, done = f.AppendNext(nil, 1<<20)
	}
	f.Release()
	add(n / 2) // the slab outgrows the claim set the first barrier had
	f = freeze("a Freeze after the wheel grew by half")
	f.Release()
}
