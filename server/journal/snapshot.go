package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

const (
	snapMagic   = "TICKSNAP"
	snapVersion = 1
	snapHeader  = 20 // magic, version uint32, index uint64
	snapTrailer = 12 // payload length uint64, CRC-32C uint32
	snapPrefix  = "snap-"
	snapExt     = ".snap"
	tmpExt      = ".tmp"
	corruptExt  = ".corrupt"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type snapInfo struct {
	index uint64
	path  string
	size  int64
	mtime time.Time
}

func (j *Journal) snapPath(index uint64) string {
	return filepath.Join(j.dir, fmt.Sprintf("%s%020d%s", snapPrefix, index, snapExt))
}

// listDir sorts the directory's entries: segment ids (ascending), snapshot
// files (ascending by index); it removes leftover temporary snapshots and
// refuses a name the library would take for a segment but we did not write.
func (j *Journal) listDir() ([]uint32, []snapInfo, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	var ids []uint32
	var snaps []snapInfo
	for _, e := range entries {
		name := e.Name()
		var id uint32
		var idx uint64
		switch {
		case e.IsDir():
		case strings.HasPrefix(name, removingPrefix): // before .snap.tmp: a removing-….snap.tmp too
			j.log.Info("journal: finishing a deletion a stop interrupted", "file", name)
			j.removeNamed(filepath.Join(j.dir, name))
		case strings.HasSuffix(name, snapExt+tmpExt):
			j.log.Warn("journal: removing a snapshot that was never committed", "file", name)
			j.remove(filepath.Join(j.dir, name))
		case parseName(name, "%d"+segExt, &id):
			if name != filepath.Base(j.segPath(id)) {
				return nil, nil, fmt.Errorf("journal: stray file %s in %s looks like a log segment", name, j.dir)
			}
			ids = append(ids, id)
		case parseName(name, snapPrefix+"%d"+snapExt, &idx) && name == filepath.Base(j.snapPath(idx)):
			info, err := e.Info()
			if err != nil {
				return nil, nil, fmt.Errorf("journal: %w", err)
			}
			snaps = append(snaps, snapInfo{index: idx, path: filepath.Join(j.dir, name),
				size: info.Size(), mtime: info.ModTime()})
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	sort.Slice(snaps, func(a, b int) bool { return snaps[a].index < snaps[b].index })
	return ids, snaps, nil
}

// parseName is fmt.Sscanf as the library uses it to find segment files.
func parseName(name, format string, v any) bool {
	_, err := fmt.Sscanf(name, format, v)
	return err == nil
}

// pickSnapshot picks the newest snapshot whose ends are good and keeps it
// open for Snapshot; bad ones are set aside (renamed *.corrupt) and logged.
// It checks each file's header and its trailer's length, not its payload:
// reading 1.8 GB at 100M timers to check the CRC, and again to restore it,
// took 0.4 s of a restart; the reader Snapshot returns checks the CRC as
// the caller restores (see RejectSnapshot). With Options.Repair it reads
// and checks each whole file, newest first, as a repair decides what to cut
// from the snapshot it will start from.
func (j *Journal) pickSnapshot(snaps []snapInfo) error {
	for i := len(snaps) - 1; i >= 0; i-- {
		f, n, err := openSnapshot(snaps[i].path, snaps[i].index, j.opts.Repair)
		if err == nil {
			j.snapFile, j.snapIndex, j.snapLen = f, snaps[i].index, n
			j.snaps = append(j.snaps, snaps[:i+1]...)
			return nil
		}
		if err := j.setAside(snaps[i].path, err); err != nil {
			return err
		}
	}
	return nil
}

// setAside renames a bad snapshot file *.corrupt (*.corrupt.N when one
// of that name was set aside before: the evidence is kept), logging why.
func (j *Journal) setAside(path string, cause error) error {
	to := path + corruptExt
	for n := 1; fileExists(to); n++ {
		to = fmt.Sprintf("%s%s.%d", path, corruptExt, n)
	}
	j.log.Error("journal: ignoring a bad snapshot; falling back to the previous one and the log",
		"file", path, "err", cause, "set_aside_as", filepath.Base(to))
	if err := os.Rename(path, to); err != nil {
		return fmt.Errorf("journal: setting aside bad snapshot: %w", err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// openSnapshot checks a snapshot file's header and the payload length its
// trailer gives, and with whole its payload's CRC too; it returns the file
// open with its payload length.
func openSnapshot(path string, index uint64, whole bool) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	n, err := checkSnapshot(f, index, whole)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, n, nil
}

func checkSnapshot(f *os.File, index uint64, whole bool) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n := st.Size() - snapHeader - snapTrailer
	if n < 0 {
		return 0, fmt.Errorf("%w: snapshot file too short (%d bytes)", ErrCorrupt, st.Size())
	}
	r := newSnapReader(f, index, n)
	if r.err != nil {
		return 0, r.err
	}
	if whole {
		_, err := io.Copy(io.Discard, r)
		return n, err
	}
	var t [8]byte
	if _, err := f.ReadAt(t[:], snapHeader+n); err != nil {
		return 0, fmt.Errorf("%w: snapshot trailer: %v", ErrCorrupt, err)
	}
	if got := binary.LittleEndian.Uint64(t[:]); got != uint64(n) {
		return 0, fmt.Errorf("%w: snapshot length %d, trailer says %d", ErrCorrupt, n, got)
	}
	return n, nil
}

// snapReader streams a snapshot's payload, checking the header first and
// the trailer and CRC when it reaches the end.
type snapReader struct {
	f   *os.File
	sec *io.SectionReader
	n   int64
	crc uint32
	err error // sticky
	// good, if not nil, is set when the reader reaches io.EOF with the
	// trailer and CRC matching (Journal.snapRead).
	good *atomic.Bool
}

func newSnapReader(f *os.File, index uint64, n int64) *snapReader {
	r := &snapReader{f: f, sec: io.NewSectionReader(f, snapHeader, n), n: n}
	var h [snapHeader]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		r.err = fmt.Errorf("%w: snapshot header: %v", ErrCorrupt, err)
		return r
	}
	switch {
	case string(h[:8]) != snapMagic:
		r.err = fmt.Errorf("%w: not a snapshot file (bad magic)", ErrCorrupt)
	case binary.LittleEndian.Uint32(h[8:12]) != snapVersion:
		r.err = fmt.Errorf("%w: snapshot format version %d", ErrCorrupt, binary.LittleEndian.Uint32(h[8:12]))
	case binary.LittleEndian.Uint64(h[12:20]) != index:
		r.err = fmt.Errorf("%w: snapshot header says index %d, its name %d", ErrCorrupt,
			binary.LittleEndian.Uint64(h[12:20]), index)
	}
	r.crc = crc32.Update(0, castagnoli, h[:])
	return r
}

// Read returns payload bytes; at the end it returns io.EOF only if the
// trailer and CRC match, else an error wrapping ErrCorrupt.
func (r *snapReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.sec.Read(p)
	r.crc = crc32.Update(r.crc, castagnoli, p[:n])
	if err == io.EOF {
		err = r.checkTrailer()
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

func (r *snapReader) checkTrailer() error {
	var t [snapTrailer]byte
	if _, err := r.f.ReadAt(t[:], snapHeader+r.n); err != nil {
		return fmt.Errorf("%w: snapshot trailer: %v", ErrCorrupt, err)
	}
	if binary.LittleEndian.Uint64(t[:8]) != uint64(r.n) {
		return fmt.Errorf("%w: snapshot length %d, trailer says %d", ErrCorrupt, r.n, binary.LittleEndian.Uint64(t[:8]))
	}
	if crc32.Update(r.crc, castagnoli, t[:8]) != binary.LittleEndian.Uint32(t[8:]) {
		return fmt.Errorf("%w: snapshot CRC mismatch", ErrCorrupt)
	}
	if r.good != nil {
		r.good.Store(true)
	}
	return io.EOF
}

// Close ends the reader; the file itself stays open until the first Append.
func (r *snapReader) Close() error {
	if r.err == nil {
		r.err = os.ErrClosed
	}
	return nil
}

// SnapshotWriter receives one snapshot's bytes. Write, Commit and Abort
// must be called from one goroutine (not necessarily the loop's) while the
// loop goes on appending.
type SnapshotWriter struct {
	j     *Journal
	index uint64
	seg   uint32 // first segment after the snapshot
	f     *os.File
	bw    *bufio.Writer
	n     int64
	// started: the payload bytes before it have had their writeback
	// started (startWriteback).
	started int64
	crc     uint32
	err     error // sticky write error
	done    bool
	tmp     string
	target  string
}

// CreateSnapshot starts a snapshot covering every record <= index, which
// must be the last index appended (LastIndex). It first writes any queued
// records (failing if the journal stays unhealthy), then closes the active
// segment (fsyncing it) so that records after index go to new segments, and
// creates the temporary snapshot file. One snapshot at a time: a second call
// before Commit or Abort fails with ErrSnapshotInProgress.
func (j *Journal) CreateSnapshot(index uint64) (*SnapshotWriter, error) {
	if j.closed {
		return nil, ErrClosed
	}
	if index != j.last {
		return nil, fmt.Errorf("journal: snapshot index %d is not the last index %d", index, j.last)
	}
	if !j.started {
		j.endRecovery()
	}
	if err := j.flush(); err != nil {
		return nil, fmt.Errorf("journal: cannot snapshot while unhealthy: %w", err)
	}
	j.mu.Lock()
	busy := j.snapBusy
	j.snapBusy = true
	j.mu.Unlock()
	if busy {
		return nil, ErrSnapshotInProgress
	}
	w, err := j.startSnapshot(index)
	if err != nil {
		j.mu.Lock()
		j.snapBusy = false
		j.mu.Unlock()
		return nil, err
	}
	return w, nil
}

func (j *Journal) startSnapshot(index uint64) (*SnapshotWriter, error) {
	if j.act.size > 0 {
		if err := j.rotate(); err != nil {
			return nil, j.fail(err)
		}
	}
	w := &SnapshotWriter{j: j, index: index, seg: j.act.id, target: j.snapPath(index)}
	w.tmp = w.target + tmpExt
	f, err := os.OpenFile(w.tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	w.f, w.bw = f, bufio.NewWriterSize(f, 256<<10)
	var h [snapHeader]byte
	copy(h[:], snapMagic)
	binary.LittleEndian.PutUint32(h[8:], snapVersion)
	binary.LittleEndian.PutUint64(h[12:], index)
	w.crc = crc32.Update(0, castagnoli, h[:])
	_, _ = w.bw.Write(h[:])
	return w, nil
}

// Write appends snapshot bytes. Errors are sticky and also returned by
// Commit.
func (w *SnapshotWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("journal: snapshot already committed or aborted")
	}
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.bw.Write(p)
	w.crc = crc32.Update(w.crc, castagnoli, p[:n])
	w.n += int64(n)
	w.err = err
	if err == nil && w.n-w.started >= writebackEvery {
		// Start the disk on what is written so far, so Commit's fsync has
		// little left to wait for: a long fsync stalls a one-CPU process.
		startWriteback(w.f, w.n+headerSlack) // the header precedes the payload
		w.started = w.n
	}
	return n, err
}

// writebackEvery is how many snapshot bytes are written between two
// starts of their writeback; headerSlack covers the file's header, which
// precedes the payload.
const (
	writebackEvery = 4 << 20
	headerSlack    = 4096
)

// Commit finishes the snapshot: it writes the trailer, fsyncs the file,
// renames it into place and fsyncs the directory; then it deletes snapshots
// beyond Options.KeepSnapshots and marks for deletion the log segments
// wholly covered by the oldest snapshot kept (the loop deletes them at its
// next Append or Sync). On error nothing changes and the temporary file is
// removed. After Close it fails with ErrClosed.
func (w *SnapshotWriter) Commit() error {
	if w.done {
		return errors.New("journal: snapshot already committed or aborted")
	}
	w.done = true
	err := w.finish()
	if err != nil {
		_ = w.f.Close()
		w.j.remove(w.tmp)
		w.j.mu.Lock()
		w.j.snapBusy = false
		w.j.mu.Unlock()
		return err
	}
	var size int64
	if st, err := os.Stat(w.target); err == nil {
		size = st.Size()
	}
	w.j.committed(snapInfo{index: w.index, path: w.target, size: size, mtime: time.Now()}, w.seg)
	return nil
}

func (w *SnapshotWriter) finish() error {
	w.j.mu.Lock()
	shut := w.j.shut
	w.j.mu.Unlock()
	if shut {
		return ErrClosed
	}
	if w.err != nil {
		return fmt.Errorf("journal: writing snapshot: %w", w.err)
	}
	var t [snapTrailer]byte
	binary.LittleEndian.PutUint64(t[:8], uint64(w.n))
	binary.LittleEndian.PutUint32(t[8:], crc32.Update(w.crc, castagnoli, t[:8]))
	_, _ = w.bw.Write(t[:])
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("journal: writing snapshot: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("journal: fsync snapshot: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("journal: closing snapshot: %w", err)
	}
	if err := os.Rename(w.tmp, w.target); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := syncDir(w.j.dir); err != nil {
		// The file is complete and valid; only its name may not survive a
		// crash. Keep it, as a later Open would.
		w.j.log.Warn("journal: fsync of the directory after a snapshot", "err", err)
	}
	return nil
}

// Abort drops the snapshot: it removes the temporary file and changes
// nothing else. It does nothing after Commit or a previous Abort.
func (w *SnapshotWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	_ = w.f.Close()
	w.j.remove(w.tmp)
	w.j.mu.Lock()
	w.j.snapBusy = false
	w.j.mu.Unlock()
}

// committed records a new snapshot and applies retention.
func (j *Journal) committed(s snapInfo, seg uint32) {
	j.mu.Lock()
	for len(j.snaps) > 0 && j.snaps[len(j.snaps)-1].index >= s.index {
		j.snaps = j.snaps[:len(j.snaps)-1] // the same index again: replaced by the rename
	}
	j.snaps = append(j.snaps, s)
	j.snapSeg = seg
	j.snapBusy = false
	del := j.retainLocked()
	j.mu.Unlock()
	for _, p := range del {
		j.remove(p)
	}
	j.log.Info("journal: snapshot committed", "index", s.index, "bytes", s.size,
		"snapshots_deleted", len(del))
}

// retainLocked drops the snapshots beyond KeepSnapshots (returning their
// paths to delete) and moves the segments wholly covered by the oldest kept
// one to toDelete. With fewer snapshots than KeepSnapshots no segment is
// deletable: the log must reach back to index 1 in case the only snapshot
// turns out bad.
func (j *Journal) retainLocked() []string {
	var del []string
	for len(j.snaps) > j.opts.KeepSnapshots {
		del = append(del, j.snaps[0].path)
		j.snaps = j.snaps[1:]
	}
	if len(j.snaps) < j.opts.KeepSnapshots {
		return del
	}
	cover := j.snaps[0].index
	for len(j.closedSeg) > 0 && j.closedSeg[0].last <= cover {
		j.toDelete = append(j.toDelete, j.segPath(j.closedSeg[0].id))
		j.closedSeg = j.closedSeg[1:]
	}
	if len(j.toDelete) > 0 {
		j.maint.Store(true)
	}
	return del
}
