package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
	j = mustOpen(t, o)
	data, idx, ok := readSnapshot(t, j)
	if !ok || idx != second || !bytes.Equal(data, bigContent(210, 9<<20)) {
		t.Fatalf("Snapshot = %d bytes at %d, %v; want the second's at %d", len(data), idx, ok, second)
	}
	checkReplay(t, replayAll(t, j), 211, 220, 100)
	j.Close()
}

// TestOpenFinishesAnInterruptedDeletion: a stop in the middle of a
// deletion in steps leaves a file cut short under removingPrefix + its
// name (a snapshot, a segment). Open deletes it, takes it for neither,
// and recovers the rest whole.
func TestOpenFinishesAnInterruptedDeletion(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncAlways, SegmentSize: 1 << 20}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 100, 20<<10)
	idx := snapshotAt(t, j, bigContent(100, 6<<20))
	appendRecs(t, j, 101, 120, 100)
	segs := segFiles(t, dir)
	j.Close()

	// As remove leaves them when stopped after its first step: the snapshot
	// and the first segment renamed, each cut by one step or to half.
	cut := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		n := max(len(b)-removeStep, len(b)/2)
		dst := filepath.Join(dir, removingPrefix+name)
		if err := os.WriteFile(dst, b[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	left := []string{cut(j.snapPath(idx), filepath.Base(j.snapPath(idx))), cut(segs[0], filepath.Base(segs[0]))}
	// One whose name would read as a newer snapshot's, were the prefix ignored.
	left = append(left, cut(j.snapPath(idx), filepath.Base(j.snapPath(idx+1000))))

	j = mustOpen(t, o)
	data, got, ok := readSnapshot(t, j)
	if !ok || got != idx || !bytes.Equal(data, bigContent(100, 6<<20)) {
		t.Fatalf("Snapshot = %d bytes at %d, %v; want %d", len(data), got, ok, idx)
	}
	checkReplay(t, replayAll(t, j), 101, 120, 100)
	j.Close()
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: still there after Open (%v)", filepath.Base(p), err)
		}
	}
}
