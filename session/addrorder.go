package session

import (
	"math/bits"
	"unsafe"
)

// inAddressOrder sorts rs by the page each record lies in (a radix sort:
// a few sequential passes, about 10 ns a record). A walk of records in the
// map's order is a random walk of the heap: past the TLB's reach (100,000
// receivers of about 200 bytes are 20 MB) each record costs a page walk,
// 150-200 ns on this machine; in page order the records of a page are read
// together. tmp is scratch of at least len(rs) (returned, grown if not).
func inAddressOrder(rs, tmp []*receiver) []*receiver {
	if cap(tmp) < len(rs) {
		tmp = make([]*receiver, len(rs))
	}
	tmp = tmp[:len(rs)]
	if len(rs) < 2 {
		return tmp
	}
	page := func(r *receiver) uintptr { return uintptr(unsafe.Pointer(r)) >> 12 }
	lo, hi := page(rs[0]), page(rs[0])
	for _, r := range rs {
		lo, hi = min(lo, page(r)), max(hi, page(r))
	}
	const digit = 11
	var count [1 << digit]int
	src, dst := rs, tmp
	for shift := 0; shift < bits.Len64(uint64(hi-lo)); shift += digit {
		clear(count[:])
		for _, r := range src {
			count[(page(r)-lo)>>shift&(1<<digit-1)]++
		}
		at := 0
		for i, n := range count {
			count[i], at = at, at+n
		}
		for _, r := range src {
			k := (page(r) - lo) >> shift & (1<<digit - 1)
			dst[count[k]] = r
			count[k]++
		}
		src, dst = dst, src
	}
	if &src[0] != &rs[0] {
		copy(rs, src)
	}
	return tmp
}
