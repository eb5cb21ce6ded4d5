package wheel

import "math/bits"

// freeSet holds the free indices of a slab. It hands out the index freed
// last if it has not been handed out again (so add-then-cancel churn keeps
// reusing one hot node), and otherwise the lowest.
//
// Lowest-first, unlike a LIFO free list, keeps the timers added one after
// another next to one another in memory even after a mass cancel or a burst
// of firings scattered the free indices: the next burst then fires through
// memory in order, which the CPU prefetches, instead of one cache miss per
// timer (a LIFO list handed out a receiver's old slots at a 512-node stride
// after a cancel-all, and a burst of 1M fired at 127 ns a timer instead of
// 56: BenchmarkFireBurst .../after=cancelall).
//
// Three levels of bitmaps: l0 has a bit per index, l1 a bit per non-zero
// word of l0, l2 a bit per non-zero word of l1, so finding the lowest free
// index reads three words once the scan of l2 (one word per 2^18 indices) is
// past the full region, which lo2 remembers.
type freeSet struct {
	hot        uint32 // the index freed last + 1, not in the bitmaps; 0: none
	l0, l1, l2 []uint64
	n          uint32 // free indices in the bitmaps
	lo2        int    // every l2 word below lo2 is zero
}

// grow makes room for indices below size. Indices must be added only below
// a size grown to.
func (f *freeSet) grow(size uint32) {
	for len(f.l0) < int(size+63)>>6 {
		f.l0 = append(f.l0, 0)
	}
	for len(f.l1) < int(size+4095)>>12 {
		f.l1 = append(f.l1, 0)
	}
	for len(f.l2) < int(size+1<<18-1)>>18 {
		f.l2 = append(f.l2, 0)
	}
}

// add marks index i free. It must not be free already.
func (f *freeSet) add(i uint32) {
	if f.hot == 0 {
		f.hot = i + 1
		return
	}
	// The hot index goes to the bitmaps; i becomes the hot one.
	i, f.hot = f.hot-1, i+1
	j, k, m := i>>6, i>>12, int(i>>18)
	f.l0[j] |= 1 << (i & 63)
	f.l1[k] |= 1 << (j & 63)
	f.l2[m] |= 1 << (k & 63)
	f.lo2 = min(f.lo2, m)
	f.n++
}

// take removes and returns a free index (the hot one, else the lowest), or
// false when there is none.
func (f *freeSet) take() (uint32, bool) {
	if f.hot != 0 {
		i := f.hot - 1
		f.hot = 0
		return i, true
	}
	if f.n == 0 {
		return 0, false
	}
	m := f.lo2
	for f.l2[m] == 0 {
		m++
	}
	f.lo2 = m
	k := m<<6 | bits.TrailingZeros64(f.l2[m])
	j := k<<6 | bits.TrailingZeros64(f.l1[k])
	i := j<<6 | bits.TrailingZeros64(f.l0[j])
	if f.l0[j] &^= 1 << (i & 63); f.l0[j] == 0 {
		if f.l1[k] &^= 1 << (j & 63); f.l1[k] == 0 {
			f.l2[m] &^= 1 << (k & 63)
		}
	}
	f.n--
	return uint32(i), true
}
