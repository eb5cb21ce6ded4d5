package journal

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseSyncPolicy(t *testing.T) {
	for _, p := range []SyncPolicy{SyncAlways, SyncEverySec, SyncNo} {
		got, err := ParseSyncPolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("ParseSyncPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseSyncPolicy("sometimes"); err == nil {
		t.Fatal("ParseSyncPolicy accepted a bad name")
	}
	if (Options{}).Sync != SyncEverySec {
		t.Fatal("the default policy is not everysec")
	}
}

func TestRoundTripAcrossRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	for round, pol := range []SyncPolicy{SyncNo, SyncAlways, SyncEverySec, SyncNo} {
		j := mustOpen(t, Options{Dir: dir, Sync: pol, SegmentSize: 8 << 10})
		first := uint64(round*300 + 1)
		checkReplay(t, replayAll(t, j), 1, first-1, 50)
		appendRecs(t, j, first, first+299, 50)
		if pol == SyncAlways {
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v", st.Mode(), err)
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	defer j.Close()
	if j2, err := Open(Options{Dir: dir, Sync: SyncNo}); err == nil {
		j2.Close()
		t.Fatal("a second Journal opened the same directory")
	}
}

func TestStrayLookalikeRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "7.seg.bak"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, Sync: SyncNo}); err == nil || !strings.Contains(err.Error(), "stray") {
		t.Fatalf("Open = %v, want a stray-file error", err)
	}
}

// fillTo appends 40..1000-byte records until the active segment is exactly
// size bytes long (size must lie in the current block, 8+ bytes ahead).
func fillTo(t *testing.T, j *Journal, size int64) {
	t.Helper()
	for j.act.size < size {
		rest := size - j.act.size
		n := int64(500)
		if rest <= 1100 {
			n = rest - chunkHeader - int64(len(binary.AppendUvarint(nil, j.last+1)))
		}
		if _, err := j.Append(recBytes(j.last+1, int(n))); err != nil {
			t.Fatal(err)
		}
	}
	if j.act.size != size {
		t.Fatalf("filled to %d, want %d", j.act.size, size)
	}
}

// tornCase builds a log whose last record starts at start and is size
// bytes, and returns its directory, the record count and the segment
// length before and after the last record.
func tornCase(t *testing.T, start int64, size int) (string, uint64, int64, int64) {
	dir := t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	appendRecs(t, j, 1, 20, 100)
	fillTo(t, j, start)
	before := j.act.size
	if _, err := j.Append(recBytes(j.last+1, size)); err != nil {
		t.Fatal(err)
	}
	n, after := j.last, j.act.size
	closeAsCrash(t, j)
	return dir, n, before, after
}

// reopenAfterDamage opens a damaged copy, expects records 1..keep, then
// appends two records, reopens, and expects 1..keep+2 with nothing between.
func reopenAfterDamage(t *testing.T, dir string, keep uint64, wantLog string) {
	t.Helper()
	var lb logBuf
	j, err := Open(Options{Dir: dir, Sync: SyncNo, Log: lb.logger()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got := replayAll(t, j)
	checkReplay(t, got, 1, keep, -1)
	if wantLog != "" && !strings.Contains(lb.String(), wantLog) {
		t.Fatalf("log %q lacks %q", lb.String(), wantLog)
	}
	appendRecs(t, j, keep+1, keep+2, 33)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	got = replayAll(t, j)
	checkReplay(t, got[keep:], keep+1, keep+2, 33)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTornLastRecordEveryOffset cuts the segment at every byte offset inside
// the last record, for a record in mid-block, one split across a block
// boundary, and one after block padding; a record of several blocks is cut
// at sampled offsets. Every reopen keeps the records before it and logs the
// file and the bytes dropped.
func TestTornLastRecordEveryOffset(t *testing.T) {
	cases := []struct {
		name   string
		start  int64
		size   int
		stride int64
	}{
		{"mid-block", 5000, 100, 1},
		{"across-blocks", blockSize - 50, 200, 1},
		{"after-padding", blockSize - 4, 60, 1},
		{"three-blocks", 3000, 70000, 331},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, n, before, after := tornCase(t, c.start, c.size)
			stride := c.stride
			if testing.Short() && stride == 1 {
				stride = 7
			}
			for off := before; off < after; off += stride {
				dir := copyDir(t, base)
				seg := filepath.Join(dir, "000000001.seg")
				if err := os.Truncate(seg, off); err != nil {
					t.Fatal(err)
				}
				want := ""
				chunk := c.start
				if blockSize-chunk%blockSize <= chunkHeader {
					chunk += blockSize - chunk%blockSize // the record starts after padding
				}
				if off > chunk { // cut inside the record, not just in padding
					want = "dropped_bytes=" + formatInt(off-before)
				}
				reopenAfterDamage(t, dir, n-1, want)
			}
		})
	}
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// TestGarbageAfterLastRecord appends random or zero bytes after a complete
// log, as a crash in the middle of extending the file can leave. Random
// bytes are a torn tail, cut with a log line; zeros are the log's end (a
// preallocated tail: TestPreallocatedTail), nothing to cut.
func TestGarbageAfterLastRecord(t *testing.T) {
	base, n, _, after := tornCase(t, 9000, 150)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 6, 7, 8, 100, 5000, 40000} {
		for _, zero := range []bool{false, true} {
			dir := copyDir(t, base)
			junk := make([]byte, size)
			if !zero {
				for k := range junk {
					junk[k] = byte(rng.UintN(256))
				}
			}
			appendToFile(t, filepath.Join(dir, "000000001.seg"), junk)
			want := "dropped_bytes=" + formatInt(int64(size))
			if zero {
				want = ""
			}
			reopenAfterDamage(t, dir, n, want)
			if got := fileSize(t, filepath.Join(dir, "000000001.seg")); got <= after {
				t.Fatalf("segment is %d bytes after the new appends", got)
			}
		}
	}
}

// multiSegment writes 300 records of 100 bytes over 4 KiB segments and
// returns the directory and each record's segment and start offset.
func multiSegment(t *testing.T) (string, map[uint64][2]int64) {
	dir := t.TempDir()
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10})
	where := map[uint64][2]int64{}
	for i := uint64(1); i <= 300; i++ {
		seg, off := j.act.id, j.act.size
		appendRecs(t, j, i, i, 100)
		if j.act.id != seg {
			seg, off = j.act.id, 0
		}
		where[i] = [2]int64{int64(seg), off}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, where
}

func TestCorruptRecordInTheMiddle(t *testing.T) {
	base, where := multiSegment(t)
	lastSeg := where[300][0]
	var firstOfLast uint64
	for i := uint64(300); where[i][0] == lastSeg; i-- {
		firstOfLast = i
	}
	cases := []struct {
		name string
		rec  uint64 // record whose data gets a flipped bit
	}{
		{"earlier record of the last segment", firstOfLast + 1},
		{"non-last segment", 50},
		{"last record of a non-last segment", firstOfLast - 1},
		{"first record", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, base)
			seg := filepath.Join(dir, formatSeg(where[c.rec][0]))
			flipBit(t, seg, where[c.rec][1]+chunkHeader+10)
			_, err := Open(Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10})
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want a CorruptError", err)
			}
			if ce.File != seg || ce.Offset != where[c.rec][1] {
				t.Fatalf("error names %s@%d, want %s@%d", ce.File, ce.Offset, seg, where[c.rec][1])
			}
			if !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), formatInt(ce.Offset)) {
				t.Fatalf("message %q lacks file or offset", err)
			}
			var lb logBuf
			j, err := Open(Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, Repair: true, Log: lb.logger()})
			if err != nil {
				t.Fatalf("Open with Repair: %v", err)
			}
			checkReplay(t, replayAll(t, j), 1, c.rec-1, 100)
			if !strings.Contains(lb.String(), "repair cut the log") {
				t.Fatalf("no repair log line: %s", lb.String())
			}
			if n := len(segFiles(t, dir)); int64(n) != where[c.rec][0] {
				t.Fatalf("%d segments left, want %d", n, where[c.rec][0])
			}
			appendRecs(t, j, c.rec, c.rec+5, 100)
			j.Close()
			j = mustOpen(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10})
			checkReplay(t, replayAll(t, j), 1, c.rec+5, 100)
			j.Close()
		})
	}
}

func formatSeg(id int64) string {
	s := formatInt(id)
	return strings.Repeat("0", 9-len(s)) + s + segExt
}

func TestMissingSegmentIsAGap(t *testing.T) {
	dir, where := multiSegment(t)
	if err := os.Remove(filepath.Join(dir, formatSeg(3))); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != filepath.Join(dir, formatSeg(4)) || ce.Offset != where[firstIn(where, 4)][1] ||
		!strings.Contains(ce.Reason, "missing") {
		t.Fatalf("Open = %v", err)
	}
}

func firstIn(where map[uint64][2]int64, seg int64) uint64 {
	for i := uint64(1); ; i++ {
		if where[i][0] == seg {
			return i
		}
	}
}
