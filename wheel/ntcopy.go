package wheel

import "unsafe"

// ntMin is the least copy worth non-temporal stores: below it the copy may
// well stay in the cache, where the next reader wants it.
const ntMin = 64 << 10

// copyMem copies n bytes of pointer-free memory from src to dst. Freeze
// copies tens of megabytes with it, so a large copy uses non-temporal
// stores (copyNT) where the architecture has them, which is about a third
// faster than copy for memory far larger than the cache.
func copyMem(dst, src unsafe.Pointer, n uintptr) {
	if hasNT && n >= ntMin && uintptr(dst)&15 == 0 {
		m := n &^ 63
		copyNT(dst, src, m)
		if m == n {
			return // (no pointer past the end: checkptr rejects it)
		}
		dst, src, n = unsafe.Add(dst, m), unsafe.Add(src, m), n-m
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
