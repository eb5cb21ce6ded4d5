//go:build !linux

package bigmem

import "unsafe"

// mapHuge does not map outside the Go heap here: Map falls back to it.
func mapHuge(size uintptr, huge bool) (unsafe.Pointer, bool) { return nil, false }

func unmap(addr unsafe.Pointer, size uintptr) {}

func populate(addr unsafe.Pointer, n uintptr) bool { return false }
