// Package bigmem maps the wheel's largest arrays (its timers' nodes and its
// key index) outside the Go heap, in memory the kernel may back with
// transparent huge pages.
//
// Why: at 100M timers the nodes are 5.6 GB and the index 0.5 GiB, read at
// random. In 4 KiB pages nearly every access to them is a TLB miss, and on
// a virtual machine a miss walks two page tables: 42% of a 100M restore's
// samples sat on the index builder's prefetches, and adds ran at 0.79 of
// their rate at 1M (docs/BENCHMARKS.md, "Transparent huge pages at 100M").
// The Go runtime asks for no huge pages for its heap, so under the kernel's
// THP setting `madvise` (the default of most distributions) the server got
// none, and under `always` every 2 MiB of the heap is backed whole however
// little of it is used (17% more RSS while adding 100M timers). Mapped here,
// only arrays that are dense get huge pages, with madvise(MADV_HUGEPAGE).
//
// The memory holds no Go pointers and the collector never sees it: a Mem is
// unmapped by Free, or by a cleanup once the Mem is unreachable, so whatever
// reads the memory must keep its Mem reachable. On systems other than Linux,
// or when a mapping fails, Map falls back to the Go heap.
package bigmem

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// HugePage is the size and alignment of what Map returns: 2 MiB, the huge
// page of amd64 and arm64 with 4 KiB pages.
const HugePage = 2 << 20

// mapped is the bytes mapped now, for Mapped.
var mapped atomic.Int64

// Mapped returns the bytes of all Mems mapped outside the Go heap and not
// yet freed: what the process holds beside the heap the runtime reports
// (memory not touched yet included: it is a bound of what they add to
// RSS, reached once they are written).
func Mapped() int64 { return mapped.Load() }

// Mem is memory from Map.
type Mem struct {
	b    []byte
	free *freeState
}

// freeState is what the cleanup and Free share: the mapping, and whether
// it was unmapped already. It must not point to the Mem (the cleanup's
// argument keeps it alive).
type freeState struct {
	addr unsafe.Pointer
	size uintptr
	done atomic.Bool
}

// Map returns size bytes outside the Go heap, zeroed, aligned to
// HugePage, rounded up to a whole number of HugePages; or nil when it
// cannot (not Linux, or the kernel refused: the caller then uses the Go
// heap). Nothing is backed by RAM until written.
func Map(size uintptr) *Mem { return mapMem(size, true) }

// MapSmallPages is Map without asking for huge pages: for memory written
// sparsely, where a huge page's first write would back 2 MiB for a few
// bytes (under the kernel's THP setting `always` it may still get some).
func MapSmallPages(size uintptr) *Mem { return mapMem(size, false) }

func mapMem(size uintptr, huge bool) *Mem {
	size = (size + HugePage - 1) &^ (HugePage - 1)
	addr, ok := mapHuge(size, huge)
	if !ok {
		return nil
	}
	f := &freeState{addr: addr, size: size}
	m := &Mem{b: unsafe.Slice((*byte)(addr), size), free: f}
	mapped.Add(int64(size))
	runtime.AddCleanup(m, release, f)
	return m
}

// Bytes returns the memory. It is valid while m is reachable and not freed.
func (m *Mem) Bytes() []byte { return m.b }

// Free unmaps m now. Nothing may read or write it after (the caller's
// contract: nothing else holds a reference into it). Freeing twice, or a
// nil Mem, does nothing.
func (m *Mem) Free() {
	if m == nil {
		return
	}
	release(m.free)
	m.b = nil
}

func release(f *freeState) {
	if f.done.Swap(true) {
		return
	}
	unmap(f.addr, f.size)
	mapped.Add(-int64(f.size))
}

// Populate backs bytes off to off+n of m with RAM now, zeroed, as a
// write to each page would, without writing (madvise MADV_POPULATE_WRITE,
// Linux 5.14+): on a goroutine of its own, ahead of the one that will
// write the memory, it takes the kernel's page clearing off that one, and
// it clears faster than faults do. The memory's contents are unchanged:
// it may run while another goroutine writes other pages of m, or the same
// ones. It reports false when the kernel cannot (too old), or m is not
// mapped outside the heap. It may run while another goroutine frees m (it
// reads nothing Free writes but an atomic): it then reports false, or, in
// a race with the unmapping, backs whatever is mapped there by then with
// memory, which changes no contents either.
func (m *Mem) Populate(off, n uintptr) bool {
	if m == nil || m.free == nil || m.free.done.Load() || off+n > m.free.size {
		return false
	}
	return populate(unsafe.Add(m.free.addr, off), n)
}
