//go:build amd64 || arm64

package session

import "unsafe"

// prefetch asks the CPU to start loading the cache line at addr, without
// waiting for it (PREFETCHT0 / PRFM PLDL1KEEP), as wheel's does. It is
// only a hint: addr may be stale or unused, and nothing is read.
//
//go:noescape
func prefetch(addr unsafe.Pointer)
