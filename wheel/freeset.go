package wheel

import "math/bits"

// freeSet holds the free indices of a slab and hands out the lowest first.
//
// Lowest-first, unlike a LIFO free list, keeps the timers added one after
// another next to one another in memory even after a mass cancel or a burst
// of firings scattered the free indices: the next burst then fires through
// memory in order, which the CPU prefetches, instead of one cache miss per
// timer (a LIFO list handed out a receiver's old slots at a 512-node stride
// after a cancel-all, and 100k timers fired at half the speed).
//
// Three levels of bitmaps: l0 has a bit per index, l1 a bit per non-zero
// word of l0, l2 a bit per non-zero word of l1, so finding the lowest free
// index reads three words once the scan of l2 (one word per 2^18 indices) is
// past the full region, which lo2 remembers.
type freeSet struct {
	l0, l1, l2 []uint64
	n          uint32 // free indices
	lo2        int    // every l2 word below lo2 is zero
}

// add marks index i free. It must not be free already.
func (f *freeSet) add(i uint32) {
	j, k, m := int(i>>6), int(i>>12), int(i>>18)
	for len(f.l0) <= j {
		f.l0 = append(f.l0, 0)
	}
	for len(f.l1) <= k {
		f.l1 = append(f.l1, 0)
	}
	for len(f.l2) <= m {
		f.l2 = append(f.l2, 0)
	}
	f.l0[j] |= 1 << (i & 63)
	f.l1[k] |= 1 << (j & 63)
	f.l2[m] |= 1 << (k & 63)
	f.lo2 = min(f.lo2, m)
	f.n++
}

// take removes and returns the lowest free index, or false when none is.
func (f *freeSet) take() (uint32, bool) {
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
