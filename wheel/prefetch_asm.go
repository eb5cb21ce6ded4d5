//go:build amd64 || arm64

package wheel

import "unsafe"

// prefetch asks the CPU to start loading the cache line at addr, without
// waiting for it (PREFETCHT0 / PRFM PLDL1KEEP). It is only a hint: addr may
// be stale or unused, and nothing is read.
//
//go:noescape
func prefetch(addr unsafe.Pointer)

// prefetchSpan is prefetch of the 8 cache lines from addr (512 bytes).
//
//go:noescape
func prefetchSpan(addr unsafe.Pointer)
