package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapLog writes records 1..320 of 100 bytes over 4 KiB segments with
// snapshots at 100 and 200 (both kept), checkpoints (note 4242) and closes.
// It returns the directory, the options, and each record's segment and
// offset.
func snapLog(t testing.TB) (string, Options, map[uint64][2]int64) {
	t.Helper()
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10}
	j := mustOpen(t, o)
	where := map[uint64][2]int64{}
	for i := uint64(1); i <= 320; i++ {
		seg, off := j.act.id, j.act.size
		appendRecs(t, j, i, i, 100)
		if j.act.id != seg {
			seg, off = j.act.id, 0
		}
		where[i] = [2]int64{int64(seg), off}
		if i == 100 || i == 200 {
			snapshotAt(t, j, snapContent(i))
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(4242); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, o, where
}

// asideFiles lists the files in the repair's aside directories.
func asideFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, asidePrefix+"*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCoveredCorruptionIsNotFatal: a flipped bit in a segment the newest
// snapshot covers stops nothing (none of its records is replayed) and is
// logged; nothing is cut. It used to be a *CorruptError, and -repair then
// deleted every later segment: records 150..320, intact and needed, lost.
func TestCoveredCorruptionIsNotFatal(t *testing.T) {
	base, o, where := snapLog(t)
	for _, rec := range []uint64{101, 150, 199} {
		dir := copyDir(t, base)
		seg := filepath.Join(dir, formatSeg(where[rec][0]))
		flipBit(t, seg, where[rec][1]+chunkHeader+10)
		before := fileSize(t, seg)
		var lb logBuf
		o := o
		o.Dir, o.Log = dir, lb.logger()
		j, err := Open(o)
		if err != nil {
			t.Fatalf("record %d: Open = %v", rec, err)
		}
		data, idx, _ := readSnapshot(t, j)
		if idx != 200 || !bytes.Equal(data, snapContent(200)) {
			t.Fatalf("snapshot %d", idx)
		}
		checkReplay(t, replayAll(t, j), 201, 320, 100)
		if !strings.Contains(lb.String(), "snapshot covers") || !strings.Contains(lb.String(), seg) {
			t.Fatalf("no log line naming %s: %s", seg, lb.String())
		}
		if fileSize(t, seg) != before || len(asideFiles(t, dir)) != 0 {
			t.Fatal("the covered segment was cut or moved")
		}
		appendRecs(t, j, 321, 330, 100)
		j.Close()
	}
}

// TestRepairKeepsWhatItCuts: when the snapshot that covered a bad record
// is itself bad, the record is needed: Open fails naming the records a cut
// loses; Repair cuts there, moves (never deletes) what it cuts, and says
// what was lost.
func TestRepairKeepsWhatItCuts(t *testing.T) {
	base, o, where := snapLog(t)
	dir := copyDir(t, base)
	flipBit(t, filepath.Join(dir, filepath.Base((&Journal{dir: dir}).snapPath(200))), 100)
	seg := filepath.Join(dir, formatSeg(where[150][0]))
	flipBit(t, seg, where[150][1]+chunkHeader+10)
	var total int64
	for _, f := range segFiles(t, dir) {
		if segID(f) >= where[150][0] {
			total += fileSize(t, f)
		}
	}
	o.Dir = dir
	_, _, _, err := openRecover(t, o)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != seg || ce.Offset != where[150][1] {
		t.Fatalf("Open = %v", err)
	}
	if ce.LostFrom != 150 || ce.LostTo != 320 || !strings.Contains(err.Error(), "records 150 to 320 (171 records") ||
		strings.Contains(err.Error(), "Options.Repair") {
		t.Fatalf("error %q (lost %d..%d)", err, ce.LostFrom, ce.LostTo)
	}
	var lb logBuf
	o.Repair, o.Log = true, lb.logger()
	j := mustOpen(t, o)
	if _, idx, _ := readSnapshot(t, j); idx != 100 {
		t.Fatalf("snapshot %d, want 100", idx)
	}
	checkReplay(t, replayAll(t, j), 101, 149, 100)
	r := j.Repaired()
	if r.LostFrom != 150 || r.LostTo != 320 || r.Lost() != 171 || r.Aside == "" || !r.TailOK || r.Tail.Note != 4242 {
		t.Fatalf("Repaired = %+v", r)
	}
	var kept int64
	for _, f := range asideFiles(t, dir) {
		if strings.HasSuffix(f, segExt) {
			kept += fileSize(t, f)
		}
	}
	if kept != total {
		t.Fatalf("the aside directory holds %d bytes of segments, the cut ones were %d", kept, total)
	}
	for _, w := range []string{"first_lost=150", "last_lost=320", "records_lost=171", "aside=" + r.Aside} {
		if !strings.Contains(lb.String(), w) {
			t.Fatalf("repair log lacks %s: %s", w, lb.String())
		}
	}
	appendRecs(t, j, 150, 160, 100)
	j.Close()
	o.Repair = false
	j = mustOpen(t, o) // the TAIL that recorded 320 went aside with the rest
	checkReplay(t, replayAll(t, j), 101, 160, 100)
	j.Close()
}

// TestMissingTailRefused: a deleted last segment used to leave a log that
// simply ended earlier, and Open started without a word. TAIL records the
// last index fsynced: Open refuses, naming the missing records; Repair
// accepts it, says what is lost and keeps TAIL aside.
func TestMissingTailRefused(t *testing.T) {
	base, o, where := snapLog(t)
	dir := copyDir(t, base)
	lastSeg := where[320][0]
	first := firstIn(where, lastSeg)
	if err := os.Remove(filepath.Join(dir, formatSeg(lastSeg))); err != nil {
		t.Fatal(err)
	}
	o.Dir = dir
	_, err := Open(o)
	var te *TailError
	if !errors.As(err, &te) || !errors.Is(err, ErrTailMissing) || te.LogLast != first-1 || te.Tail.Durable != 320 ||
		te.Tail.Note != 4242 || !strings.Contains(err.Error(), formatInt(int64(first))+" to 320") {
		t.Fatalf("Open = %v", err)
	}
	o.Repair = true
	j := mustOpen(t, o)
	checkReplay(t, replayAll(t, j), 201, first-1, 100)
	r := j.Repaired()
	if r.LostFrom != first || r.LostTo != 320 || r.Tail.Note != 4242 || r.Aside == "" {
		t.Fatalf("Repaired = %+v", r)
	}
	if _, err := os.Stat(filepath.Join(r.Aside, tailName)); err != nil {
		t.Fatalf("TAIL not kept aside: %v", err)
	}
	j.Close()
	o.Repair = false
	mustOpen(t, o).Close()
}

// TestTailNeverAheadOfTheLog: Checkpoint records only what was fsynced,
// and a torn or damaged TAIL loses the check, never the start.
func TestTailNeverAheadOfTheLog(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Sync: SyncAlways, SegmentSize: 4 << 10}
	j := mustOpen(t, o)
	appendRecs(t, j, 1, 10, 100)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	appendRecs(t, j, 11, 12, 100) // written, not fsynced
	if err := j.Checkpoint(7); err != nil {
		t.Fatal(err)
	}
	if tl, ok := j.readTail(); !ok || tl.Durable != 10 || tl.Last != 12 || tl.Note != 7 {
		t.Fatalf("TAIL = %+v, %v", tl, ok)
	}
	j.Checkpoint(8) // slot 2
	j.Checkpoint(9) // slot 1 again
	closeAsCrash(t, j)
	// A torn write spoils one slot: another still reads, and at worst the
	// slot Open wrote for the new log, which no Checkpoint rewrites.
	tp := filepath.Join(dir, tailName)
	flipBit(t, tp, tailSlot+9)
	j = mustOpen(t, o)
	if tl, ok := j.tail, j.tailOK; !ok || tl.Note != 8 {
		t.Fatalf("TAIL with its newest slot torn = %+v, %v", tl, ok)
	}
	j.tailOn = false
	j.Close()
	flipBit(t, tp, 2*tailSlot+9)
	j = mustOpen(t, o)
	if tl, ok := j.tail, j.tailOK; !ok || tl != (Tail{}) {
		t.Fatalf("TAIL with both checkpoint slots torn = %+v, %v", tl, ok)
	}
	j.tailOn = false // keep the file as it is
	j.Close()
	flipBit(t, tp, 9)
	var lb logBuf
	o.Log = lb.logger()
	j = mustOpen(t, o)
	if !strings.Contains(lb.String(), "unreadable TAIL") {
		t.Fatalf("log: %s", lb.String())
	}
	j.Close()
}

// TestCoveredCorruptionInLastSegment: the segment with the bad record is
// the last one (the segments after it, and TAIL, gone): valid records the
// snapshot covers follow the bad one in the same file, so it is covered
// too. Open skips it, and records appended after it replay across it.
func TestCoveredCorruptionInLastSegment(t *testing.T) {
	base, o, where := snapLog(t)
	dir := copyDir(t, base)
	for _, f := range segFiles(t, dir) {
		if segID(f) > where[200][0] {
			os.Remove(f)
		}
	}
	os.Remove(filepath.Join(dir, tailName))
	rec := firstIn(where, where[200][0]) + 1 // in the last segment, before 200
	if rec >= 200 {
		t.Fatalf("record %d", rec)
	}
	seg := filepath.Join(dir, formatSeg(where[rec][0]))
	flipBit(t, seg, where[rec][1]+chunkHeader+10)
	var lb logBuf
	o.Dir, o.Log = dir, lb.logger()
	j := mustOpen(t, o)
	if _, idx, _ := readSnapshot(t, j); idx != 200 {
		t.Fatalf("snapshot %d", idx)
	}
	checkReplay(t, replayAll(t, j), 201, 200, 100)
	if !strings.Contains(lb.String(), "resumed_at="+formatInt(where[rec+1][1])) {
		t.Fatalf("log: %s", lb.String())
	}
	appendRecs(t, j, 201, 210, 100)
	j.Close()
	j = mustOpen(t, o)
	checkReplay(t, replayAll(t, j), 201, 210, 100)
	j.Close()
}

// TestBothSnapshotsBadRepairKeepsEvidence: both snapshots corrupt leave a
// log that does not reach back to index 1. Repair starts from nothing but
// deletes nothing: the snapshots stay as *.corrupt, every segment and TAIL
// go aside, and the report counts every record as lost.
func TestBothSnapshotsBadRepairKeepsEvidence(t *testing.T) {
	base, o, _ := snapLog(t)
	dir := copyDir(t, base)
	jd := &Journal{dir: dir}
	flipBit(t, jd.snapPath(100), 100)
	flipBit(t, jd.snapPath(200), 100)
	segsBefore := len(segFiles(t, dir))
	o.Dir = dir
	_, _, _, err := openRecover(t, o)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "records 1 to 320 (320 records") {
		t.Fatalf("Open = %v", err)
	}
	o.Repair = true
	j := mustOpen(t, o)
	if _, _, ok := readSnapshot(t, j); ok || j.LastIndex() != 0 {
		t.Fatalf("a snapshot, or last index %d", j.LastIndex())
	}
	r := j.Repaired()
	if r.LostFrom != 1 || r.LostTo != 320 || r.Tail.Note != 4242 {
		t.Fatalf("Repaired = %+v", r)
	}
	for _, p := range []string{jd.snapPath(100) + corruptExt, jd.snapPath(200) + corruptExt, filepath.Join(r.Aside, tailName)} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("evidence gone: %v", err)
		}
	}
	if n := len(asideFiles(t, dir)) - 1; n != segsBefore { // less TAIL
		t.Fatalf("%d segments aside, there were %d", n, segsBefore)
	}
	j.Close()
}

// TestDurableLastRecordIsNotATornTail: a bad last record used to be cut as
// a torn tail, silently, even when it had been fsynced long before; Open
// then refused (TAIL) with the evidence already gone. TAIL tells a crash's
// torn record (never fsynced) from damage: damage fails Open untouched, and
// Repair keeps a copy of what it cuts.
func TestDurableLastRecordIsNotATornTail(t *testing.T) {
	base, o, where := snapLog(t)
	dir := copyDir(t, base)
	seg := filepath.Join(dir, formatSeg(where[320][0]))
	flipBit(t, seg, where[320][1]+chunkHeader+10)
	size := fileSize(t, seg)
	o.Dir = dir
	_, _, _, err := openRecover(t, o)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != where[320][1] || ce.LostFrom != 320 || !strings.Contains(ce.Reason, "fsynced") {
		t.Fatalf("Open = %v", err)
	}
	if fileSize(t, seg) != size {
		t.Fatal("a refused Open cut the segment")
	}
	o.Repair = true
	j := mustOpen(t, o)
	checkReplay(t, replayAll(t, j), 201, 319, 100)
	if r := j.Repaired(); r.LostFrom != 320 || r.LostTo != 320 {
		t.Fatalf("Repaired = %+v", r)
	}
	j.Close()
	if got := fileSize(t, filepath.Join(j.repaired.Aside, filepath.Base(seg))); got != size {
		t.Fatalf("the copy kept is %d bytes, the segment was %d", got, size)
	}
}
