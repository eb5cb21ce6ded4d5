//go:build !amd64

package wheel

import "unsafe"

// hasNT says copyNT is implemented: not on this architecture.
const hasNT = false

func copyNT(dst, src unsafe.Pointer, n uintptr) { panic("wheel: copyNT") }
