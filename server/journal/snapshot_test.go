package journal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// snapshotAt writes a snapshot of content at the journal's last index.
func snapshotAt(t testing.TB, j *Journal, content []byte) uint64 {
	t.Helper()
	idx := j.LastIndex()
	w, err := j.CreateSnapshot(idx)
	if err != nil {
		t.Fatalf("CreateSnapshot(%d): %v", idx, err)
	}
	if _, err := w.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return idx
}

func snapContent(idx uint64) []byte {
	return bytes.Repeat([]byte("state@"+formatInt(int64(idx))+";"), 3000)
}

func TestSnapshotThenReplayAfterIt(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncNo, SegmentSize: 8 << 10}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 100, 80)
	snapshotAt(t, j, snapContent(100))
	appendRecs(t, j, 101, 150, 80)
	j.Close()

	// One snapshot of KeepSnapshots=2: the log is all kept, records <= 100
	// are still in it and Replay skips them.
	j = mustOpen(t, o)
	data, idx, ok := readSnapshot(t, j)
	if !ok || idx != 100 || !bytes.Equal(data, snapContent(100)) {
		t.Fatalf("Snapshot = %d bytes, %d, %v", len(data), idx, ok)
	}
	checkReplay(t, replayAll(t, j), 101, 150, 80)
	if j.LastIndex() != 150 {
		t.Fatalf("LastIndex %d", j.LastIndex())
	}
	appendRecs(t, j, 151, 160, 80)
	if _, _, ok := j.Snapshot(); ok {
		t.Fatal("Snapshot still offered after Append")
	}
	if err := j.Replay(func(uint64, []byte) error { return nil }); !errors.Is(err, ErrRecoveryOver) {
		t.Fatalf("Replay after Append = %v", err)
	}
	j.Close()
}

// TestRetentionDeletesCoveredSegments: with two snapshots kept, segments
// wholly covered by the older one go (files deleted, descriptors closed),
// and a snapshot with nothing after it leaves an empty log to replay.
func TestRetentionDeletesCoveredSegments(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncAlways, SegmentSize: 4 << 10}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 200, 100)
	s1 := snapshotAt(t, j, snapContent(200))
	segsAfterFirst := len(segFiles(t, dir))
	appendRecs(t, j, 201, 400, 100)
	snapshotAt(t, j, snapContent(400))
	appendRecs(t, j, 401, 401, 100) // the loop starts the deletion at its next write
	j.waitDeletions()
	for _, f := range segFiles(t, dir) {
		if id := segID(f); id <= int64(j.snapSeg) && id < int64(j.act.id) && lastOf(t, f) <= s1 {
			t.Fatalf("segment %s covered by snapshot %d not deleted", f, s1)
		}
	}
	if n := len(segFiles(t, dir)); n >= segsAfterFirst+6 {
		t.Fatalf("%d segments left (had %d after the first snapshot)", n, segsAfterFirst)
	}
	if deleted := deletedSegFDs(t, dir); deleted != 0 {
		t.Fatalf("%d descriptors still open on deleted segment files", deleted)
	}
	st := j.Stats()
	if st.SnapshotIndex != 400 || st.LogSinceSnapshot <= 0 || st.LogSinceSnapshot > 4<<10 || st.Segments != len(segFiles(t, dir)) {
		t.Fatalf("Stats %+v", st)
	}
	snapshotAt(t, j, snapContent(401))
	j.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "snap-*")); len(m) != 2 {
		t.Fatalf("snapshot files %v, want 2", m)
	}
	j = mustOpen(t, o)
	data, idx, _ := readSnapshot(t, j)
	if idx != 401 || !bytes.Equal(data, snapContent(401)) {
		t.Fatalf("snapshot %d", idx)
	}
	checkReplay(t, replayAll(t, j), 402, 401, 100)
	appendRecs(t, j, 402, 410, 100)
	j.Close()
}

func segID(path string) int64 {
	var id int64
	parseName(filepath.Base(path), "%d"+segExt, &id)
	return id
}

// lastOf returns the last index in a segment file.
func lastOf(t testing.TB, path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := newSegReader(f, fileSize(t, path), make([]byte, blockSize))
	var last uint64
	for {
		data, err := r.next()
		if err != nil {
			return last
		}
		last, _, _ = decodeRecord(data)
	}
}

// deletedSegFDs counts this process's descriptors on deleted segment files
// of dir (Linux), which would keep their disk space.
func deletedSegFDs(t testing.TB, dir string) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil &&
			strings.HasPrefix(target, dir) && strings.HasSuffix(target, segExt+" (deleted)") {
			n++
		}
	}
	return n
}

func TestLeftoverTmpSnapshotIgnored(t *testing.T) {
	dir := t.TempDir()
	var lb logBuf
	o := Options{Dir: dir, Sync: SyncNo, Log: lb.logger()}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 50, 60)
	snapshotAt(t, j, snapContent(50))
	appendRecs(t, j, 51, 80, 60)
	w, err := j.CreateSnapshot(80)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(snapContent(80)[:1000]) // the process "dies" half-way
	w.bw.Flush()
	appendRecs(t, j, 81, 90, 60)
	j.Close()
	if _, err := os.Stat(w.tmp); err != nil {
		t.Fatalf("the half-written snapshot should still be there: %v", err)
	}
	j = mustOpen(t, o)
	data, idx, _ := readSnapshot(t, j)
	if idx != 50 || !bytes.Equal(data, snapContent(50)) {
		t.Fatalf("snapshot %d", idx)
	}
	checkReplay(t, replayAll(t, j), 51, 90, 60)
	if _, err := os.Stat(w.tmp); !os.IsNotExist(err) {
		t.Fatalf("tmp snapshot not removed: %v", err)
	}
	if !strings.Contains(lb.String(), "never committed") {
		t.Fatalf("log: %s", lb.String())
	}
	j.Close()
}

// TestCorruptSnapshotFallsBack damages the newest snapshot in several ways;
// Open uses the previous one and the log, which still covers everything.
func TestCorruptSnapshotFallsBack(t *testing.T) {
	base := t.TempDir()
	o := Options{Dir: base, Sync: SyncNo, SegmentSize: 4 << 10}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 100, 100)
	snapshotAt(t, j, snapContent(100))
	appendRecs(t, j, 101, 200, 100)
	snapshotAt(t, j, snapContent(200))
	appendRecs(t, j, 201, 300, 100)
	snapshotAt(t, j, snapContent(300))
	appendRecs(t, j, 301, 320, 100)
	j.Close()
	newest := filepath.Base(j.snapPath(300))
	damages := map[string]func(path string){
		"flipped bit": func(p string) { flipBit(t, p, fileSize(t, p)/2) },
		"flipped CRC": func(p string) { flipBit(t, p, fileSize(t, p)-1) },
		"bad header":  func(p string) { flipBit(t, p, 2) },
		"truncated":   func(p string) { os.Truncate(p, fileSize(t, p)-100) },
		"header only": func(p string) { os.Truncate(p, snapHeader) },
		"bad index":   func(p string) { flipBit(t, p, 13) },
		"extra byte":  func(p string) { appendToFile(t, p, []byte{0}) },
		"empty file":  func(p string) { os.Truncate(p, 0) },
		"other's copy": func(p string) {
			b, _ := os.ReadFile(filepath.Join(filepath.Dir(p), filepath.Base(j.snapPath(200))))
			os.WriteFile(p, b, 0o600)
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, base)
			damage(filepath.Join(dir, newest))
			var lb logBuf
			o := o
			o.Dir, o.Log = dir, lb.logger()
			j, data, idx, err := openRecover(t, o)
			if err != nil || idx != 200 || !bytes.Equal(data, snapContent(200)) {
				t.Fatalf("snapshot %d, %v", idx, err)
			}
			checkReplay(t, replayAll(t, j), 201, 320, 100)
			if !strings.Contains(lb.String(), "bad snapshot") {
				t.Fatalf("log: %s", lb.String())
			}
			if _, err := os.Stat(filepath.Join(dir, newest+corruptExt)); err != nil {
				t.Fatalf("bad snapshot not set aside: %v", err)
			}
			appendRecs(t, j, 321, 330, 100)
			j.Close()
		})
	}
}

// TestSnapshotReaderChecksWhileStreaming: a snapshot damaged after Open is
// reported by the reader at its end, not as a clean EOF.
func TestSnapshotReaderChecksWhileStreaming(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	appendRecs(t, j, 1, 5, 10)
	snapshotAt(t, j, snapContent(5))
	j.Close()
	j = mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	defer j.Close()
	flipBit(t, j.snapPath(5), snapHeader+7)
	r, _, _ := j.Snapshot()
	if _, err := io.ReadAll(r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading a damaged snapshot: %v", err)
	}
}

func TestSnapshotAbortAndErrors(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	appendRecs(t, j, 1, 10, 10)
	if _, err := j.CreateSnapshot(9); err == nil {
		t.Fatal("CreateSnapshot accepted an index that is not the last")
	}
	w, err := j.CreateSnapshot(10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateSnapshot(10); !errors.Is(err, ErrSnapshotInProgress) {
		t.Fatalf("second CreateSnapshot = %v", err)
	}
	w.Write([]byte("partial"))
	w.Abort()
	w.Abort()
	if err := w.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "snap-*")); len(m) != 0 {
		t.Fatalf("files left by Abort: %v", m)
	}
	w, err = j.CreateSnapshot(10)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := w.Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "snap-*")); len(m) != 0 {
		t.Fatalf("files left: %v", m)
	}
}

// TestSnapshotWhileAppending runs the encoder on its own goroutine while
// the loop appends and snapshots again and again (run it with -race).
func TestSnapshotWhileAppending(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncEverySec, SegmentSize: 4 << 10, syncInterval: 2e6}
	j := mustOpen(t, o)
	var wg sync.WaitGroup
	var last uint64
	for round := 0; round < 20; round++ {
		appendRecs(t, j, last+1, last+50, 100)
		last += 50
		w, err := j.CreateSnapshot(last)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w *SnapshotWriter, idx uint64) {
			defer wg.Done()
			c := snapContent(idx)
			for len(c) > 0 {
				n := min(len(c), 777)
				if _, err := w.Write(c[:n]); err != nil {
					t.Error(err)
					return
				}
				c = c[n:]
			}
			if err := w.Commit(); err != nil {
				t.Error(err)
			}
		}(w, last)
		appendRecs(t, j, last+1, last+30, 100)
		last += 30
		_ = j.Stats()
		wg.Wait()
	}
	j.Close()
	j = mustOpen(t, o)
	data, idx, _ := readSnapshot(t, j)
	if idx != last-30 || !bytes.Equal(data, snapContent(idx)) {
		t.Fatalf("snapshot %d", idx)
	}
	checkReplay(t, replayAll(t, j), idx+1, last, 100)
	j.Close()
}

// TestLogMustContinueSnapshot: with one snapshot kept, the log before it is
// deleted, so if that snapshot goes bad the log no longer reaches index 1:
// Open refuses, naming the missing records.
func TestLogMustContinueSnapshot(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, KeepSnapshots: 1}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 100, 100)
	snapshotAt(t, j, snapContent(100))
	appendRecs(t, j, 101, 110, 100)
	j.Close()
	flipBit(t, j.snapPath(100), 100)
	_, _, _, err := openRecover(t, o)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "records missing") {
		t.Fatalf("Open = %v", err)
	}
}

// threeSnapshots writes snapshots at 100, 200 and 300 with the log up to
// 320, all kept, in a new directory it returns.
func threeSnapshots(t *testing.T) string {
	dir := t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, KeepSnapshots: 3})
	for _, at := range []uint64{100, 200, 300} {
		appendRecs(t, j, at-99, at, 100)
		snapshotAt(t, j, snapContent(at))
	}
	appendRecs(t, j, 301, 320, 100)
	j.Close()
	return dir
}

func snapFileNames(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, snapPrefix+"*"+snapExt))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// TestRejectedSnapshotFallsBackWithLessKept: Open checks only a snapshot's
// ends, so it must delete nothing until the payload has been read whole:
// here the directory holds more snapshots than KeepSnapshots (1), and the
// newest is damaged inside. Retention at Open would have deleted the
// previous snapshot and the log after it, the only way back.
func TestRejectedSnapshotFallsBackWithLessKept(t *testing.T) {
	dir := threeSnapshots(t)
	o := Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, KeepSnapshots: 1}
	jd := &Journal{dir: dir}
	flipBit(t, jd.snapPath(300), snapHeader+500)
	j, data, idx, err := openRecover(t, o)
	if err != nil || idx != 200 || !bytes.Equal(data, snapContent(200)) {
		t.Fatalf("snapshot %d, %v", idx, err)
	}
	checkReplay(t, replayAll(t, j), 201, 320, 100)
	if _, err := os.Stat(jd.snapPath(300) + corruptExt); err != nil {
		t.Fatalf("the bad snapshot not set aside: %v", err)
	}
	appendRecs(t, j, 321, 321, 100)
	j.Close()
	if got := snapFileNames(t, dir); len(got) != 1 || got[0] != filepath.Base(jd.snapPath(200)) {
		t.Fatalf("snapshots left after the good one was read and a record appended: %v", got)
	}
	j, data, idx, err = openRecover(t, o)
	if err != nil || idx != 200 || !bytes.Equal(data, snapContent(200)) {
		t.Fatalf("reopened: snapshot %d, %v", idx, err)
	}
	checkReplay(t, replayAll(t, j), 201, 321, 100)
	j.Close()
}

// TestRetentionAfterTheSnapshotIsRead: the retention Open leaves for later
// is applied at the first Append once the snapshot was read to io.EOF, and
// not while it was not: an Append after no read, or after a partial one,
// deletes nothing.
func TestRetentionAfterTheSnapshotIsRead(t *testing.T) {
	for _, read := range []string{"whole", "part", "none"} {
		t.Run(read, func(t *testing.T) {
			dir := threeSnapshots(t)
			segs := len(segFiles(t, dir))
			j := mustOpen(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, KeepSnapshots: 1})
			if len(snapFileNames(t, dir)) != 3 || len(segFiles(t, dir)) != segs {
				t.Fatal("Open deleted files before the snapshot was read")
			}
			r, _, _ := j.Snapshot()
			switch read {
			case "whole":
				if _, err := io.ReadAll(r); err != nil {
					t.Fatal(err)
				}
			case "part":
				if _, err := r.Read(make([]byte, 10)); err != nil {
					t.Fatal(err)
				}
			}
			appendRecs(t, j, 321, 322, 100)
			j.Close()
			snaps, left := snapFileNames(t, dir), len(segFiles(t, dir))
			if read == "whole" {
				if len(snaps) != 1 || left >= segs {
					t.Fatalf("after the read: snapshots %v, %d of %d segments", snaps, left, segs)
				}
			} else if len(snaps) != 3 || left < segs {
				t.Fatalf("without a whole read: snapshots %v, %d of %d segments", snaps, left, segs)
			}
			j, _, idx, err := openRecover(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, KeepSnapshots: 1})
			if err != nil || idx != 300 {
				t.Fatalf("reopened: snapshot %d, %v", idx, err)
			}
			checkReplay(t, replayAll(t, j), 301, 322, 100)
			j.Close()
		})
	}
}

// TestSetAsideKeepsEarlierEvidence: a snapshot set aside at an index where
// one was set aside before does not replace it (.corrupt.1).
func TestSetAsideKeepsEarlierEvidence(t *testing.T) {
	dir := threeSnapshots(t)
	jd := &Journal{dir: dir}
	require := func(ok bool, f string, a ...any) {
		t.Helper()
		if !ok {
			t.Fatalf(f, a...)
		}
	}
	require(os.WriteFile(jd.snapPath(300)+corruptExt, []byte("earlier"), 0o600) == nil, "write")
	flipBit(t, jd.snapPath(300), snapHeader+500)
	j, _, idx, err := openRecover(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, KeepSnapshots: 3})
	require(err == nil && idx == 200, "snapshot %d, %v", idx, err)
	j.Close()
	b, err := os.ReadFile(jd.snapPath(300) + corruptExt)
	require(err == nil && string(b) == "earlier", "the earlier evidence: %q, %v", b, err)
	_, err = os.Stat(jd.snapPath(300) + corruptExt + ".1")
	require(err == nil, "the new one: %v", err)
}
