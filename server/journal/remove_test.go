package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// bigContent is a snapshot's content of n bytes, distinct by idx.
func bigContent(idx uint64, n int) []byte {
	b := bytes.Repeat(snapContent(idx), n/len(snapContent(idx))+1)
	return b[:n]
}

// removingFiles lists the files of dir named for a deletion in steps.
func removingFiles(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), removingPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestBigFilesDeletedInSteps: a snapshot and segments bigger than
// removeStep, deleted by retention, are gone with nothing left under the
// deletion's name, and what is kept recovers whole.
func TestBigFilesDeletedInSteps(t *testing.T) {
	var mu sync.Mutex
	steps := map[string]int{} // base name (removingPrefix + the file's) -> steps
	removeStepHook = func(path string, _ int64) {
		mu.Lock()
		steps[filepath.Base(path)]++
		mu.Unlock()
	}
	t.Cleanup(func() { removeStepHook = nil })
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncAlways, SegmentSize: 6 << 20, KeepSnapshots: 1}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 200, 64<<10) // 12.8 MB: segments of 6 MiB
	oldSeg := segFiles(t, dir)[0]
	if fileSize(t, oldSeg) <= removeStep {
		t.Fatalf("the first segment has %d bytes, not more than a step", fileSize(t, oldSeg))
	}
	first := snapshotAt(t, j, bigContent(200, 9<<20))
	appendRecs(t, j, 201, 210, 64<<10)
	second := snapshotAt(t, j, bigContent(210, 9<<20))
	appendRecs(t, j, 211, 220, 100)
	j.Close() // waits for the segments' deletion

	if _, err := os.Stat(j.snapPath(first)); !os.IsNotExist(err) {
		t.Fatalf("the first snapshot (9 MiB) is still there: %v", err)
	}
	if got := removingFiles(t, dir); len(got) != 0 {
		t.Fatalf("files left under the deletion's name: %v", got)
	}
	if _, err := os.Stat(oldSeg); !os.IsNotExist(err) {
		t.Fatalf("the first segment, covered by the second snapshot, is still there: %v", err)
	}
	mu.Lock()
	snapSteps, segSteps := steps[removingPrefix+filepath.Base(j.snapPath(first))], steps[removingPrefix+filepath.Base(oldSeg)]
	mu.Unlock()
	if snapSteps != 3 || segSteps < 2 { // 9 MiB: 5, 1, 0
		t.Fatalf("steps: the snapshot %d (want 3), the segment %d (want 2 or more); all: %v", snapSteps, segSteps, steps)
	}
	recoversWhole(t, o, second, bigContent(210, 9<<20), 211, 220, 100)
}

// recoversWhole opens the journal at o and checks its snapshot (at idx,
// with content) and the records replayed after it (first..last of size).
func recoversWhole(t *testing.T, o Options, idx uint64, content []byte, first, last uint64, size int) {
	t.Helper()
	j := mustOpen(t, o)
	defer j.Close()
	data, got, ok := readSnapshot(t, j)
	if !ok || got != idx || !bytes.Equal(data, content) {
		t.Fatalf("Snapshot = %d bytes at %d, %v; want %d bytes at %d", len(data), got, ok, len(content), idx)
	}
	checkReplay(t, replayAll(t, j), first, last, size)
}

// TestOpenFinishesAnInterruptedDeletion: a stop in the middle of a
// deletion in steps leaves, where the file's name was, a file cut short
// under removingPrefix + that name (an old snapshot, a covered segment).
// Open deletes it, takes it for neither, and recovers the rest whole.
func TestOpenFinishesAnInterruptedDeletion(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncAlways, SegmentSize: 1 << 20, KeepSnapshots: 1}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 100, 20<<10)
	oldSeg := segFiles(t, dir)[0]
	old := snapshotAt(t, j, bigContent(100, 6<<20))
	appendRecs(t, j, 101, 120, 100)
	kept := snapshotAt(t, j, bigContent(120, 6<<20))
	appendRecs(t, j, 121, 130, 100)
	j.Close()
	for _, p := range []string{j.snapPath(old), oldSeg} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s: not deleted by retention (%v)", p, err)
		}
	}

	// As remove leaves them when stopped after its first step: the old
	// snapshot and the covered segment renamed and cut by one step (their
	// bytes here are the kept snapshot's, cut: what a reader would misread).
	b, err := os.ReadFile(j.snapPath(kept))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, name := range []string{filepath.Base(j.snapPath(old)), filepath.Base(oldSeg),
		filepath.Base(j.snapPath(kept+1000)) + tmpExt} { // and a temporary snapshot's
		p := filepath.Join(dir, removingPrefix+name)
		if err := os.WriteFile(p, b[:len(b)-removeStep], 0o600); err != nil {
			t.Fatal(err)
		}
		left = append(left, p)
	}

	recoversWhole(t, o, kept, bigContent(120, 6<<20), 121, 130, 100)
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: still there after Open (%v)", filepath.Base(p), err)
		}
	}
	if got := removingFiles(t, dir); len(got) != 0 {
		t.Fatalf("files left under the deletion's name: %v", got)
	}
}

// TestRemoveLeavesOtherNamesWhole: a file with another name (a hard link
// into a backup) or a symlink is unlinked, never cut: the other name
// keeps every byte.
func TestRemoveLeavesOtherNamesWhole(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no link count: nothing is cut there")
	}
	dir, backup := t.TempDir(), t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	defer j.Close()
	content := bigContent(7, 9<<20)
	linked, target, symlink := filepath.Join(dir, "linked"), filepath.Join(backup, "target"), filepath.Join(dir, "symlink")
	for _, p := range []string{linked, target} {
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(linked, filepath.Join(backup, "linked")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if err := os.Symlink(target, symlink); err != nil {
		t.Fatal(err)
	}
	j.remove(linked)
	j.remove(symlink)
	for _, p := range []string{linked, symlink} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range []string{filepath.Join(backup, "linked"), target} {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, content) {
			t.Errorf("%s: %d bytes (%v), want the %d written", p, len(b), err, len(content))
		}
	}
	if got := removingFiles(t, dir); len(got) != 0 {
		t.Fatalf("files left under the deletion's name: %v", got)
	}
}
