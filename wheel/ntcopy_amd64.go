package wheel

import "unsafe"

// hasNT says copyNT is implemented.
const hasNT = true

// copyNT copies n bytes, a multiple of 64, from src to dst, which is
// 16-byte aligned, with non-temporal stores: they bypass the cache, so the
// copy does not first read every destination line (a third less memory
// traffic for a copy much larger than the cache), and it ends with a store
// fence. The memory must hold no pointers.
//
//go:noescape
func copyNT(dst, src unsafe.Pointer, n uintptr)
