package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rosedblabs/wal"
)

const testStep = 64 << 10

// TestFormatMatchesLibrary: the journal's own writer lays records out
// byte for byte as github.com/rosedblabs/wal v1.3.8 does (the format of
// every log written before it), padding and chunk splits included, with
// and without preallocation.
func TestFormatMatchesLibrary(t *testing.T) {
	sizes := []int{1, 100, blockSize - 20, 5, blockSize - 2*chunkHeader - 3, 3 * blockSize, 7, 0, 40000, 33}
	libDir := t.TempDir()
	w, err := wal.Open(wal.Options{DirPath: libDir, SegmentSize: 64 << 20, SegmentFileExt: segExt})
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range sizes {
		i := uint64(k + 1)
		if _, err := w.Write(append(binary.AppendUvarint(nil, i), recBytes(i, n)...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(libDir, formatSeg(1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{0, testStep} {
		dir := t.TempDir()
		j := mustOpen(t, Options{Dir: dir, Sync: SyncNo, Preallocate: step})
		for k, n := range sizes {
			appendRecs(t, j, uint64(k+1), uint64(k+1), n)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, formatSeg(1)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Preallocate %d: %d bytes differ from the library's %d", step, len(got), len(want))
		}
	}
}

// preallocated opens a journal with Preallocate and appends a first
// record of 10 bytes.
func preallocated(t *testing.T, o Options) *Journal {
	t.Helper()
	o.Preallocate = testStep
	j := mustOpen(t, o)
	appendRecs(t, j, j.last+1, j.last+1, 10)
	return j
}

// TestPreallocatedTail: while a preallocated segment is written its file
// ends in zeros past the last record; a crash image of it opens with every
// record and no cut (the zeros are the log's end), records appended after
// it go right after the last one, not after the zeros, and Close cuts the
// tail off.
func TestPreallocatedTail(t *testing.T) {
	dir := t.TempDir()
	j := preallocated(t, Options{Dir: dir, Sync: SyncAlways})
	appendRecs(t, j, 2, 300, 500) // past one step: the file grew twice
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	seg := j.segPath(j.act.id)
	size := fileSize(t, seg)
	if size%testStep != 0 || size <= j.act.size || size-j.act.size > testStep {
		t.Fatalf("file %d bytes for %d of records: not preallocated in %d-byte steps", size, j.act.size, testStep)
	}
	crashed := copyDir(t, dir)
	var lb logBuf
	j2 := mustOpen(t, Options{Dir: crashed, Sync: SyncAlways, Preallocate: testStep, Log: lb.logger()})
	got := replayAll(t, j2)
	checkReplay(t, got[1:], 2, 300, 500)
	if strings.Contains(lb.String(), "cut") || fileSize(t, j2.segPath(j2.act.id)) != size {
		t.Fatalf("the zero tail was cut: %d bytes, log %s", fileSize(t, j2.segPath(j2.act.id)), lb.String())
	}
	if j2.act.size != j.act.size || j2.alloc != size {
		t.Fatalf("reopened at %d (file %d), want %d (file %d)", j2.act.size, j2.alloc, j.act.size, size)
	}
	appendRecs(t, j2, 301, 310, 500)
	if err := j2.Close(); err != nil {
		t.Fatal(err)
	}
	j2 = mustOpen(t, Options{Dir: crashed, Sync: SyncNo})
	checkReplay(t, replayAll(t, j2)[1:], 2, 310, 500)
	if got := fileSize(t, j2.segPath(j2.act.id)); got != j2.act.size {
		t.Fatalf("after Close the segment is %d bytes for %d of records", got, j2.act.size)
	}
	j2.Close()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, seg); got != j.act.size {
		t.Fatalf("after Close the segment is %d bytes for %d of records", got, j.act.size)
	}
}

// TestPreallocatedRotation: closed segments are cut to their records, the
// active one is preallocated, and a crash image replays every record.
func TestPreallocatedRotation(t *testing.T) {
	dir := t.TempDir()
	j := preallocated(t, Options{Dir: dir, Sync: SyncEverySec, SegmentSize: 16 << 10})
	appendRecs(t, j, 2, 200, 300)
	if len(j.closedSeg) < 3 {
		t.Fatalf("%d closed segments, want several", len(j.closedSeg))
	}
	for _, s := range j.closedSeg {
		if got := fileSize(t, j.segPath(s.id)); got != s.size {
			t.Fatalf("closed segment %d: file %d bytes, records %d", s.id, got, s.size)
		}
	}
	if got := fileSize(t, j.segPath(j.act.id)); got != 16<<10 {
		t.Fatalf("active segment file %d bytes, want preallocated to the segment size", got)
	}
	crashed := copyDir(t, dir)
	j2 := mustOpen(t, Options{Dir: crashed, Sync: SyncNo, SegmentSize: 16 << 10})
	checkReplay(t, replayAll(t, j2)[1:], 2, 200, 300)
	j2.Close()
	j.Close()
}

// TestPreallocatedPartialWrite: a write cut short inside the preallocated
// region leaves bytes after the last record; a crash then cuts them as a
// torn tail, and the journal itself cuts them before writing again (the
// file loses its preallocation until the next write needs it).
func TestPreallocatedPartialWrite(t *testing.T) {
	dir := t.TempDir()
	var d diskFull
	j := preallocated(t, Options{Dir: dir, Sync: SyncAlways, FS: d.faults(t)})
	appendRecs(t, j, 2, 50, 100)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	good := j.act.size
	d.partial = 60
	d.writes.Store(true)
	if idx, err := j.Append(recBytes(51, 100)); idx != 51 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append = %d, %v", idx, err)
	}
	crashed := copyDir(t, dir)
	var lb logBuf
	j2 := mustOpen(t, Options{Dir: crashed, Sync: SyncNo, Log: lb.logger()})
	checkReplay(t, replayAll(t, j2)[1:], 2, 50, 100)
	if !strings.Contains(lb.String(), "cut a torn record") {
		t.Fatalf("log: %s", lb.String())
	}
	j2.Close()
	d.writes.Store(false)
	appendRecs(t, j, 52, 60, 100) // 51 first, from memory
	if err := j.Sync(); err != nil || j.Healthy() != nil {
		t.Fatalf("Sync %v, Healthy %v", err, j.Healthy())
	}
	if j.act.size <= good || fileSize(t, j.segPath(j.act.id))%testStep != 0 {
		t.Fatalf("records end at %d, file %d bytes", j.act.size, fileSize(t, j.segPath(j.act.id)))
	}
	j.Close()
	j = mustOpen(t, Options{Dir: dir, Sync: SyncNo})
	checkReplay(t, replayAll(t, j)[1:], 2, 60, 100)
	j.Close()
}

// TestUnwrittenGapIsTornTail: a machine that stops during an fdatasync may
// have stored a later record's sector and not an earlier one's (a zero
// header in a preallocated segment, or a torn one): in the last segment, a
// bad record followed by valid ones is a torn tail when neither it nor any
// record after it is at or below the index TAIL records as fsynced. Open
// cuts it without Repair, logs the records cut and keeps a copy of the
// segment in repaired-*/. The same damage at or below TAIL's index is
// refused, and so is a bad record (not zeros) followed by valid ones with
// no TAIL to tell. Before, any bad record followed by valid ones refused
// to start unless its header was zeros (about 6% of TestPowerLoss's runs
// with sectors stored out of order).
func TestUnwrittenGapIsTornTail(t *testing.T) {
	cases := []struct {
		name       string
		zero       bool   // the damage is zeros (else a flipped bit)
		tail       string // "open": TAIL as a new log's Open wrote it (0); "synced": a Checkpoint after 1..45 were fsynced; "none"
		wantCut    bool
		wantReason string
	}{
		{"zero header, TAIL 0", true, "open", true, ""},
		{"zero header, no TAIL", true, "none", true, ""},
		{"torn header, TAIL 0", false, "open", true, ""},
		{"torn header, TAIL below it", false, "synced40", true, ""},
		{"torn header, TAIL above it", false, "synced", false, "TAIL records index 45 as fsynced"},
		{"zero header, TAIL above it", true, "synced", false, "TAIL records index 45 as fsynced"},
		{"torn header, no TAIL", false, "none", false, "valid records follow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j := mustOpen(t, Options{Dir: dir, Sync: SyncNo})
			appendRecs(t, j, 1, 40, 200)
			at := j.act.size
			if c.tail == "synced40" {
				if err := j.Sync(); err != nil {
					t.Fatal(err)
				}
				j.Checkpoint(7)
			}
			appendRecs(t, j, 41, 45, 200)
			if c.tail == "synced" {
				if err := j.Sync(); err != nil {
					t.Fatal(err)
				}
				j.Checkpoint(7)
			}
			seg := j.segPath(j.act.id)
			closeAsCrash(t, j)
			if c.tail == "none" {
				if err := os.Remove(filepath.Join(dir, tailName)); err != nil {
					t.Fatal(err)
				}
			}
			if c.zero {
				writeAtFile(t, seg, at, make([]byte, 300)) // record 41 and part of 42
			} else {
				flipBit(t, seg, at+1)
			}
			damaged, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			var lb logBuf
			j, err = Open(Options{Dir: dir, Sync: SyncNo, Log: lb.logger()})
			if !c.wantCut {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Offset != at || !strings.Contains(ce.Reason, c.wantReason) {
					t.Fatalf("Open = %v, want a CorruptError at %d saying %q", err, at, c.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkReplay(t, replayAll(t, j), 1, 40, 200)
			j.Close()
			if !strings.Contains(lb.String(), "cut a torn end of the log") || !strings.Contains(lb.String(), "first_cut=41 last_cut=45") ||
				fileSize(t, seg) != at {
				t.Fatalf("file %d bytes, log %s", fileSize(t, seg), lb.String())
			}
			kept := asideFiles(t, dir)
			if len(kept) != 1 || filepath.Base(kept[0]) != filepath.Base(seg) {
				t.Fatalf("kept %v, want a copy of %s", kept, seg)
			}
			if b, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(b, damaged) {
				t.Fatalf("the copy differs from the segment as it was (%v)", err)
			}
		})
	}
}
