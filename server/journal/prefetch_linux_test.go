package journal

import (
	"bytes"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident returns how many of the file's pages are in the page cache
// (mincore(2) of a mapping of it), and how many it has.
func resident(t *testing.T, path string) (in, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, len(vec)
}

// TestSnapshotPrefetched: a snapshot whose file left the page cache is read
// ahead into it as soon as Snapshot hands it out, before the caller reads
// it, so a restore from a cold cache does not wait for the disk a read at a
// time. (Before, only the pages read so far and the kernel's small
// readahead were in memory: none, here.)
func TestSnapshotPrefetched(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncNo}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 10, 80)
	content := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16) // 6 MiB: two chunks and a half
	idx := snapshotAt(t, j, content)
	j.Close()
	path := (&Journal{dir: dir}).snapPath(idx)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if in, all := resident(t, path); in > all/4 {
		t.Skipf("%d of %d pages still cached after POSIX_FADV_DONTNEED (a file system that keeps them)", in, all)
	}

	j = mustOpen(t, o)
	defer j.Close()
	if _, _, ok := j.Snapshot(); !ok {
		t.Fatal("no snapshot")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, all := resident(t, path)
		if in == all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the snapshot file's %d pages in the page cache 10 s after Snapshot, before any read", in, all)
		}
		time.Sleep(5 * time.Millisecond)
	}
	data, _, _ := readSnapshot(t, j)
	if !bytes.Equal(data, content) {
		t.Fatal("the snapshot read back differs")
	}
}
