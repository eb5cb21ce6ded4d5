package wheel

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestIndexSpareChunksAreMapped checks that the chunks the index makes
// ahead for its next table are resident once made: the move that starts
// at 3/4 writes to random positions of the new table, and untouched
// chunks, fresh from the system, cost the growing wheel's first turns of
// the move a page fault per insertion (docs/BENCHMARKS.md, "Loop pauses
// and lateness at 100M").
func TestIndexSpareChunksAreMapped(t *testing.T) {
	if testing.Short() {
		t.Skip("adds 360k timers")
	}
	w := newWheel(t, 0, Config{})
	x := &w.index
	need := 2 << 19 >> chunkShift
	for tid := uint64(1); x.table.len() < 1<<19 || len(x.spare) < need; tid++ {
		if err := w.Add(Key{tid % 1000, tid}, Spec{After: 1_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	pageSize := uintptr(unix.Getpagesize())
	for k, c := range x.spare {
		begin := uintptr(unsafe.Pointer(&c[0]))
		end := begin + uintptr(len(c))*4
		first := begin &^ (pageSize - 1)
		mem := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&c[0]), -int(begin-first))), end-first)
		vec := make([]byte, (len(mem)+int(pageSize)-1)/int(pageSize))
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal("mincore:", errno)
		}
		missing := 0
		for _, v := range vec {
			if v&1 == 0 {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("spare chunk %d of %d: %d of its %d pages not resident", k, len(x.spare), missing, len(vec))
		}
	}
}
