//go:build !amd64 && !arm64

package wheel

import "unsafe"

// prefetch is a no-op where tickwheel has no prefetch instruction.
func prefetch(addr unsafe.Pointer) {}

// prefetchSpan is a no-op where tickwheel has no prefetch instruction.
func prefetchSpan(addr unsafe.Pointer) {}
