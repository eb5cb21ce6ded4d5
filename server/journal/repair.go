package journal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// What Open does with a damaged log: a bad record that the chosen snapshot
// covers is skipped (skipCovered); any other is fatal (a *CorruptError
// naming the records a cut would lose), or with Options.Repair the log is
// cut there and what is cut is moved aside, never deleted (repairAt).

// asidePrefix starts the name of the directory in Options.Dir into which
// Options.Repair moves what it cuts: repaired-20261126T172238Z.
const asidePrefix = "repaired-"

// RepairReport says what Open with Options.Repair gave up; the zero value
// means nothing. Records LostFrom..LostTo are no longer in the log (none if
// LostFrom is 0): the cut ones, whether or not they could still be read,
// and those a missing tail took (see Checkpoint).
type RepairReport struct {
	Reason           string // the bad record (file, offset, why) or the missing tail
	LostFrom, LostTo uint64
	LostBytes        int64  // bytes cut from segment files; a copy is in Aside
	Aside            string // directory holding copies of every file cut or moved; "" if none
	// Tail is the last Checkpoint before the repair; ok false if there was
	// none or it could not be read.
	Tail   Tail
	TailOK bool
}

// Lost returns how many records the repair lost.
func (r RepairReport) Lost() uint64 {
	if r.LostFrom == 0 || r.LostTo < r.LostFrom {
		return 0
	}
	return r.LostTo - r.LostFrom + 1
}

// Repaired returns what Open's repair gave up (zero if it changed nothing).
func (j *Journal) Repaired() RepairReport { return j.repaired }

// lostText says what cutting the log at a bad record would lose, for its
// error.
func (e *CorruptError) lostText() string {
	if e.LostTo < e.LostFrom {
		return fmt.Sprintf("drop %d bytes (no readable record from %d on follows)", e.LostBytes, e.LostFrom)
	}
	if e.LostTo == e.LostFrom {
		return fmt.Sprintf("lose record %d (%d bytes)", e.LostFrom, e.LostBytes)
	}
	return fmt.Sprintf("lose records %d to %d (%d records, %d bytes)",
		e.LostFrom, e.LostTo, e.LostTo-e.LostFrom+1, e.LostBytes)
}

// firstIndexes returns the index of each segment's first record, 0 where
// it cannot be read (a bad first record, an empty file).
func (j *Journal) firstIndexes(ids []uint32, buf []byte) ([]uint64, error) {
	firsts := make([]uint64, len(ids))
	for i, id := range ids {
		f, err := os.Open(j.segPath(id))
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		st, err := f.Stat()
		if err == nil {
			if data, rerr := newSegReader(f, st.Size(), buf).next(); rerr == nil {
				firsts[i], _, _ = decodeRecord(data)
			}
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	return firsts, nil
}

// coveredSegments returns how many segments, from the first, hold only
// records at or below snap: those before the last one whose first record
// is at or below snap+1 (indexes are consecutive, so nothing before that
// record is above snap). A snapshot starts a new segment, so snap+1, if
// written, is the first record of its segment.
func coveredSegments(firsts []uint64, snap uint64) int {
	for i := len(firsts) - 1; i > 0; i-- {
		if firsts[i] != 0 && firsts[i] <= snap+1 {
			return i
		}
	}
	return 0
}

// skipCovered logs a bad record in a segment the snapshot covers and
// returns the segment's extent: the whole file, its last index just below
// the next readable first index (so retention deletes it in its turn).
// Nothing is cut: the file stays as it is for the operator.
func (j *Journal) skipCovered(bad *CorruptError, s segInfo, laterFirsts []uint64, snap uint64) segInfo {
	for _, f := range laterFirsts {
		if f != 0 {
			s.last = f - 1
			break
		}
	}
	if st, err := os.Stat(bad.File); err == nil {
		s.size = st.Size()
	}
	j.log.Warn("journal: a bad record in a segment the snapshot covers: not needed, skipped (the file is kept as it is)",
		"file", bad.File, "offset", bad.Offset, "reason", bad.Reason, "snapshot_index", snap)
	return s
}

// lostBy fills in what cutting the log at bad would lose: the records
// after prev (the last good one) that the snapshot (snap) does not cover,
// up to the highest one still readable after the cut, in its segment or a
// later one; and the bytes after the cut.
func (j *Journal) lostBy(bad *CorruptError, prev, snap uint64, s segInfo, later []uint32, buf []byte) error {
	bad.LostFrom = max(prev, snap) + 1
	bad.LostTo = bad.LostFrom - 1
	highest := func(path string, from int64) (int64, error) {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return 0, err
		}
		hi, err := newSegReader(f, st.Size(), buf).highestFrom(from)
		bad.LostTo = max(bad.LostTo, hi)
		return st.Size() - from, err
	}
	n, err := highest(bad.File, bad.Offset)
	if err != nil {
		return fmt.Errorf("journal: reading %s: %w", bad.File, err)
	}
	bad.LostBytes = n + bad.Offset - s.size // from the end of the good records
	for _, id := range later {
		n, err := highest(j.segPath(id), 0)
		if err != nil {
			return fmt.Errorf("journal: reading %s: %w", j.segPath(id), err)
		}
		bad.LostBytes += n
	}
	return nil
}

// repairAt cuts the log at a bad record for Options.Repair. Nothing is
// deleted: a copy of the whole segment goes into a new directory
// repaired-<time> in Options.Dir (asideDir), every later segment is moved
// there, and only then is the segment cut at its last good record.
func (j *Journal) repairAt(bad *CorruptError, s segInfo, later []uint32) error {
	aside, err := j.asideDir()
	if err != nil {
		return err
	}
	if err := copyFile(bad.File, filepath.Join(aside, filepath.Base(bad.File))); err != nil {
		return fmt.Errorf("journal: repair: keeping a copy of %s: %w", bad.File, err)
	}
	for _, id := range later {
		p := j.segPath(id)
		if err := os.Rename(p, filepath.Join(aside, filepath.Base(p))); err != nil {
			return fmt.Errorf("journal: repair: %w", err)
		}
	}
	if err := syncDir(aside); err != nil {
		return fmt.Errorf("journal: repair: %w", err)
	}
	if err := syncDir(j.dir); err != nil {
		return fmt.Errorf("journal: repair: %w", err)
	}
	if err := truncateFile(bad.File, s.size); err != nil {
		return fmt.Errorf("journal: repair: %w", err)
	}
	j.repaired = RepairReport{
		Reason:   fmt.Sprintf("bad record in %s at byte offset %d: %s", bad.File, bad.Offset, bad.Reason),
		LostFrom: bad.LostFrom, LostTo: bad.LostTo, LostBytes: bad.LostBytes, Aside: aside,
	}
	j.log.Warn("journal: repair cut the log at a bad record; what was cut is kept in the aside directory",
		"file", bad.File, "offset", bad.Offset, "reason", bad.Reason,
		"first_lost", bad.LostFrom, "last_lost", bad.LostTo, "records_lost", j.repaired.Lost(),
		"bytes_lost", bad.LostBytes, "segments_moved", len(later), "aside", aside)
	return syncDir(j.dir)
}

// asideDir creates the directory for what a repair cuts (once per Open).
func (j *Journal) asideDir() (string, error) {
	if j.aside != "" {
		return j.aside, nil
	}
	base := filepath.Join(j.dir, asidePrefix+time.Now().UTC().Format("20060102T150405Z"))
	p := base
	for k := 2; ; k++ {
		err := os.Mkdir(p, 0o700)
		if err == nil {
			break
		}
		if !os.IsExist(err) {
			return "", fmt.Errorf("journal: repair: %w", err)
		}
		p = fmt.Sprintf("%s-%d", base, k)
	}
	j.aside = p
	return p, nil
}

// copyFile copies src to a new file dst and fsyncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
