//go:build !amd64 && !arm64

package session

import "unsafe"

// prefetch is a no-op where tickwheel has no prefetch instruction.
func prefetch(addr unsafe.Pointer) {}
