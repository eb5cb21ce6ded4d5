package bigmem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapHuge maps size bytes (a multiple of HugePage) aligned to HugePage:
// it maps HugePage more, then unmaps the unaligned head and the tail. It
// then asks for huge pages (huge) or for none; a kernel that refuses (THP
// `never`, or none compiled in) leaves the mapping in small pages, which
// still serves.
func mapHuge(size uintptr, huge bool) (unsafe.Pointer, bool) {
	base, err := unix.MmapPtr(-1, 0, nil, size+HugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, false
	}
	head := (HugePage - uintptr(base)%HugePage) % HugePage
	addr := unsafe.Add(base, head)
	if head > 0 {
		_ = unix.MunmapPtr(base, head)
	}
	if tail := HugePage - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(addr, size), tail)
	}
	advice := unix.MADV_HUGEPAGE
	if !huge {
		advice = unix.MADV_NOHUGEPAGE
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(addr), size), advice)
	return addr, true
}

// unmap unmaps size bytes at addr, or only makes them inaccessible while
// poison is set.
func unmap(addr unsafe.Pointer, size uintptr) {
	if poison.Load() { // its pages given back, its addresses kept
		b := unsafe.Slice((*byte)(addr), size)
		_ = unix.Madvise(b, unix.MADV_DONTNEED)
		_ = unix.Mprotect(b, unix.PROT_NONE)
		return
	}
	_ = unix.MunmapPtr(addr, size)
}

func populate(addr unsafe.Pointer, n uintptr) bool {
	return unix.Madvise(unsafe.Slice((*byte)(addr), n), unix.MADV_POPULATE_WRITE) == nil
}
