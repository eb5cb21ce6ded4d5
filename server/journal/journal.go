package journal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// SyncPolicy says when appended records are fsynced.
type SyncPolicy int

const (
	// SyncEverySec (the zero value, the default) fsyncs about once a second
	// from a background goroutine, without blocking Append; a machine crash
	// loses at most about the last second of records, a process crash none.
	// (With every policy, the Append that fills a segment waits for one
	// fsync: the library fsyncs a full segment before starting the next.)
	SyncEverySec SyncPolicy = iota
	// SyncAlways leaves fsync to the caller: Sync once per loop turn, before
	// that turn's replies are sent.
	SyncAlways
	// SyncNo never fsyncs except when a segment fills, at CreateSnapshot and
	// at Close; the operating system writes the data back when it likes.
	SyncNo
)

// ParseSyncPolicy parses "always", "everysec" or "no" (the config file's
// spelling, as Redis's appendfsync).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "always":
		return SyncAlways, nil
	case "everysec":
		return SyncEverySec, nil
	case "no":
		return SyncNo, nil
	}
	return 0, fmt.Errorf("journal: unknown sync policy %q (want always, everysec or no)", s)
}

// String returns the spelling ParseSyncPolicy accepts.
func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncEverySec:
		return "everysec"
	case SyncNo:
		return "no"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// Options configures Open. The zero value of each field but Dir is usable.
type Options struct {
	// Dir holds the log segments and snapshot files; it is created with
	// mode 0700 if missing. Only one Journal may have it open at a time.
	Dir string
	// Sync is the fsync policy; the zero value is SyncEverySec.
	Sync SyncPolicy
	// SegmentSize is the size at which a log segment is closed and the next
	// one started (64 MiB if 0, at least 4 KiB). A record may be at most
	// half of it.
	SegmentSize int64
	// KeepSnapshots is how many committed snapshots are kept (2 if 0). The
	// log is kept from the oldest one kept, so that a snapshot found corrupt
	// at Open is replaced by the previous one plus the log.
	KeepSnapshots int
	// MaxBacklog bounds the bytes of records held in memory (64 MiB if 0;
	// each record also costs 40 bytes of bookkeeping). While the journal is
	// unhealthy, unwritten records wait in memory and past MaxBacklog Append
	// refuses more with ErrBacklogFull (the server refuses changes meanwhile,
	// so only its small per-turn records should arrive). With
	// SyncEverySec, written records are also kept until fsynced (so that a
	// failed fsync can be repaired by writing them again): past a quarter
	// of MaxBacklog the background fsync starts early, past all of it
	// Append fsyncs itself. With SyncAlways they are kept until Sync.
	MaxBacklog int64
	// Preallocate, if positive, makes the active segment's file grow ahead
	// of its records in steps of this many bytes (zeros written after them,
	// at most to SegmentSize), so that the fdatasync of a record written
	// inside the file commits no new file size or block (see preallocate).
	// The file then ends in zeros after its last record while it is
	// written (Open reads them as the log's end) and is cut back to its
	// records when the segment is closed or at Close. 0: the file grows by
	// appending.
	Preallocate int64
	// Repair makes Open cut a corrupt log at its first bad record that the
	// chosen snapshot does not cover, instead of failing with a
	// *CorruptError, and accept a log whose end is missing (see
	// Checkpoint) instead of failing with a *TailError. Nothing is
	// deleted: a copy of the cut segment, every later segment and the TAIL
	// file are moved into a new directory repaired-<time> in Dir; the
	// Journal's Repaired says what was lost.
	Repair bool
	// Log receives recovery and error reports; nil discards them.
	Log *slog.Logger
	// FS is the file layer the log's segments are written, cut back and
	// fsynced through (the directory fsynced too); nil: the operating
	// system's (vfs.OS); so is the TAIL file (Checkpoint). Tests plug in
	// vfs.Faulty to fail chosen calls and to simulate power cuts. Open's
	// scan and snapshots use the os package.
	FS vfs.FS

	syncInterval time.Duration // SyncEverySec's period; tests shorten it
}

const (
	defaultSegmentSize = 64 << 20
	minSegmentSize     = 4 << 10
	defaultBacklog     = 64 << 20
	lockName           = "LOCK"
)

var (
	// ErrClosed is returned by every method once Close has been called.
	ErrClosed = errors.New("journal: closed")
	// ErrTooLarge is returned by Append for a record over half a segment.
	ErrTooLarge = errors.New("journal: record too large")
	// ErrBacklogFull is returned by Append, which then has not taken the
	// record, when the journal is unhealthy and Options.MaxBacklog bytes of
	// records already wait in memory.
	ErrBacklogFull = errors.New("journal: unhealthy and backlog full")
	// ErrCorrupt matches (errors.Is) every *CorruptError.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrSnapshotInProgress is returned by CreateSnapshot while another
	// snapshot is neither committed nor aborted.
	ErrSnapshotInProgress = errors.New("journal: a snapshot is already in progress")
	// ErrRecoveryOver is returned by Replay once Append or CreateSnapshot
	// has been called.
	ErrRecoveryOver = errors.New("journal: Replay is only valid before the first Append")
)

// CorruptError reports a bad record in the log: a chunk whose CRC, length or
// type is wrong, or a record whose index breaks the sequence.
type CorruptError struct {
	File   string // segment file path
	Offset int64  // byte offset of the bad record in File
	Reason string
	// What cutting the log at Offset (Options.Repair) would lose, set by
	// Open (not by Replay): records LostFrom..LostTo, from the first one
	// the cut log lacks to the highest one still readable after the cut
	// (none if LostTo < LostFrom), and LostBytes bytes of segment files.
	LostFrom, LostTo uint64
	LostBytes        int64
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("journal: corrupt log %s at byte offset %d: %s", e.File, e.Offset, e.Reason)
	if e.LostFrom == 0 {
		return msg
	}
	return msg + "; cutting the log there would " + e.lostText()
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// segInfo describes one segment file. first and last are 0 for a segment
// that holds no record.
type segInfo struct {
	id          uint32
	first, last uint64
	size        int64
	from        int64 // where Replay starts reading: after the bad bytes Open skipped (snapshot-covered), or 0
}

// Journal is a write-ahead log plus snapshots in one directory. Append, Sync,
// CreateSnapshot, Healthy, Stats, LastIndex, Snapshot, Replay and Close must
// be called from one goroutine (the server's event loop); a SnapshotWriter
// is used from another.
type Journal struct {
	opts Options
	log  *slog.Logger
	dir  string
	lock *os.File

	// Owned by the loop goroutine.
	q      queue
	last   uint64  // last index handed out
	wIdx   uint64  // last index written to the operating system
	durIdx uint64  // last index known durable (SyncNo: written)
	durOff int64   // end of the durable records in the active segment
	act    segInfo // the active segment
	alloc  int64   // the active segment file's size: act.size, or more if preallocated
	wbuf   []byte  // the encoded chunks of the record being written
	dirty  bool    // the active segment may hold bytes past act.size
	err    error   // why records are left unwritten; nil if none are
	// syncBad is the last failed fsync when no fsync has succeeded since
	// (see rewind); nil if none. While set, Append and Healthy report it.
	syncBad error
	closed  bool
	started bool // Append or CreateSnapshot has been called
	maxRec  int

	// Recovery data, kept until the first Append.
	snapFile  *os.File
	snapIndex uint64
	snapLen   int64 // payload bytes
	// snapRead: the snapshot's payload has been read whole and its CRC
	// matched (a snapReader from Snapshot reached io.EOF). Open checks only
	// the file's ends (pickSnapshot); retainLater: Open left its snapshot
	// retention to endRecovery, which applies it once snapRead is set.
	snapRead    atomic.Bool
	retainLater bool
	replay      []segInfo
	tail        Tail // the TAIL file's, read by Open; zero if none
	tailOK      bool
	// tailOn: TAIL is kept (Open found or wrote one, or Checkpoint was
	// called), so Close writes a last one; note is the caller's last.
	tailOn   bool
	note     uint64
	tailNext int          // the TAIL slot the next write goes to (tail.go)
	repaired RepairReport // what Options.Repair gave up
	aside    string       // the directory it moved files into; "" if none
	// deleting is closed when the covered segments being deleted off the
	// loop (maintain) are gone; nil when none are.
	deleting chan struct{}

	// mu guards what a SnapshotWriter's Commit shares with the loop.
	mu        sync.Mutex
	closedSeg []segInfo // segments before the active one, oldest first
	snaps     []snapInfo
	toDelete  []string
	snapBusy  bool
	shut      bool   // Close has begun
	snapSeg   uint32 // first segment written after the newest snapshot
	maint     atomic.Bool

	// fmu serializes the fsyncs of the active segment, the loop's and the
	// background syncer's, each held until its result is recorded: the
	// loop's fsync then starts after any failed background one has set
	// syncErr, which it checks before trusting its own success (see
	// fsyncActive). Taken before smu.
	fmu sync.Mutex
	// smu guards what the background syncer shares with the loop.
	smu       sync.Mutex
	sf        vfs.File // the active segment: written, fsynced, truncated
	gen       uint64   // bumped when written records are rewound
	written   uint64
	durable   uint64
	syncErr   error
	dirDirty  bool // a segment file was created since the last directory fsync
	lastSync  time.Duration
	syncs     uint64
	syncFails uint64
	syncSum   time.Duration // of every fsync's duration
	syncHist  SyncCounts    // fsyncs by duration (syncstats.go)
	stop      chan struct{}
	done      chan struct{}
	nudge     chan struct{} // asks the syncer to fsync now
	wrote     chan struct{} // tells the syncer there is something to fsync
	passes    atomic.Uint64 // the syncer's fsync attempts, for the tests
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("journal: Options.Dir is empty")
	}
	if o.Sync < SyncEverySec || o.Sync > SyncNo {
		return o, fmt.Errorf("journal: bad sync policy %d", int(o.Sync))
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = defaultSegmentSize
	}
	if o.SegmentSize < minSegmentSize || o.SegmentSize > 1<<40 {
		return o, fmt.Errorf("journal: SegmentSize %d out of range", o.SegmentSize)
	}
	if o.KeepSnapshots == 0 {
		o.KeepSnapshots = 2
	}
	if o.KeepSnapshots < 1 {
		return o, fmt.Errorf("journal: KeepSnapshots %d < 1", o.KeepSnapshots)
	}
	if o.MaxBacklog == 0 {
		o.MaxBacklog = defaultBacklog
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = vfs.OS{}
	}
	if o.syncInterval == 0 {
		o.syncInterval = time.Second
	}
	return o, nil
}

// Open opens (or creates) the journal in o.Dir and recovers it: it removes
// leftover temporary snapshots, picks the newest valid snapshot, checks every
// log record, cuts a torn tail (a torn last record, or a torn record
// followed by valid ones none of which was fsynced: see the package
// comment), applies snapshot retention, and opens the last segment for
// appending. It fails with a *CorruptError on a bad record that is not a
// torn tail (unless o.Repair), with a *TailError if the log ends before
// what TAIL recorded (unless o.Repair), and with an error if the log does
// not continue the snapshot (records missing after its index).
func Open(o Options) (*Journal, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &Journal{opts: o, log: o.Log, dir: o.Dir, maxRec: int(o.SegmentSize / 2)}
	if j.lock, err = lockDir(filepath.Join(o.Dir, lockName)); err != nil {
		return nil, err
	}
	if err := j.recover(); err != nil {
		j.release()
		return nil, err
	}
	if o.Sync == SyncEverySec {
		j.stop, j.done, j.nudge, j.wrote = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1), make(chan struct{}, 1)
		j.wrote <- struct{}{} // what recovery left (a new segment's directory entry)
		go j.syncLoop(o.syncInterval)
	}
	return j, nil
}

// recover is Open's work once the directory is locked.
func (j *Journal) recover() error {
	segIDs, snaps, err := j.listDir()
	if err != nil {
		return err
	}
	if err := j.pickSnapshot(snaps); err != nil {
		return err
	}
	j.tail, j.tailOK = j.readTail()
	segs, logLast, err := j.scanLog(segIDs, j.snapIndex)
	if err != nil {
		return err
	}
	j.last = max(logLast, j.snapIndex)
	if err := j.checkTail(); err != nil {
		return err
	}
	if !j.tailOK && len(segIDs) == 0 && len(snaps) == 0 {
		// A new log: TAIL's slot 0, fsynced here and never written again,
		// so that a power cut (before the first Checkpoint, or tearing
		// both later slots) still finds one and can tell a torn tail from
		// damage (tornTail).
		if err := j.writeTail(Tail{}, true); err != nil {
			return err
		}
		j.tailOn = true
	}
	if j.tailOK && j.repaired.Reason == "" {
		j.tailOn, j.note = true, j.tail.Note
	}
	j.wIdx, j.durIdx = j.last, j.last
	j.written, j.durable = j.last, j.last
	if len(segs) > 0 {
		if err := j.syncSegment(segs[len(segs)-1].id); err != nil {
			return err
		}
		j.act = segs[len(segs)-1]
		j.closedSeg = append([]segInfo(nil), segs[:len(segs)-1]...)
	}
	j.snapSeg = j.act.id
	for _, s := range segs {
		if s.last > j.snapIndex {
			j.snapSeg = s.id
			break
		}
	}
	j.mu.Lock()
	var snapDel []string
	if j.snapFile != nil && !j.opts.Repair {
		// The snapshot's payload is checked as the caller reads it: until
		// then it may be bad, and what it covers (the older snapshots and
		// their log) is the fallback (RejectSnapshot).
		j.retainLater = true
	} else {
		snapDel = j.retainLocked()
	}
	segDel := j.toDelete
	j.toDelete = nil
	j.maint.Store(false) // deleted right here
	j.mu.Unlock()
	for _, p := range append(snapDel, segDel...) {
		j.remove(p)
	}
	for _, s := range segs {
		if s.last > j.snapIndex && !j.isDeleted(s.id, segDel) {
			j.replay = append(j.replay, s)
		}
	}
	if len(segs) == 0 {
		j.act = segInfo{id: firstSegment}
		j.snapSeg = j.act.id
	}
	j.durOff = j.act.size
	if err := j.openActive(); err != nil {
		return err
	}
	return j.opts.FS.SyncDir(j.dir)
}

// openActive opens (creating it if there is none) the active segment for
// writing and notes its file's size, past its records if it was
// preallocated: the tail that Open's scan read as zeros, written over from
// act.size on.
func (j *Journal) openActive() error {
	f, err := j.opts.FS.OpenFile(j.segPath(j.act.id), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	j.sf, j.alloc = f, max(size, j.act.size)
	return nil
}

func (j *Journal) isDeleted(id uint32, paths []string) bool {
	for _, p := range paths {
		if p == j.segPath(id) {
			return true
		}
	}
	return false
}

func (j *Journal) segPath(id uint32) string { return segFileName(j.dir, id) }

// syncSegment fsyncs a segment file so that its records count as durable.
func (j *Journal) syncSegment(id uint32) error {
	f, err := os.Open(j.segPath(id))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("journal: fsync %s: %w", f.Name(), err)
	}
	return nil
}

// release closes every file Open may have opened; used by a failed Open and
// by Close.
func (j *Journal) release() {
	if j.sf != nil {
		_ = j.sf.Close()
	}
	j.endRecovery()
	if j.lock != nil {
		unlockDir(j.lock)
		j.lock = nil
	}
}

// endRecovery drops the recovery data; called at the first Append or
// CreateSnapshot, and by Close. The retention Open left for later is
// applied if the snapshot was read whole and found good: its deletions go
// to maintain, off the loop.
func (j *Journal) endRecovery() {
	if j.retainLater && j.snapRead.Load() && !j.closed {
		j.mu.Lock()
		del := j.retainLocked()
		j.toDelete = append(j.toDelete, del...)
		if len(j.toDelete) > 0 {
			j.maint.Store(true)
		}
		j.mu.Unlock()
	}
	j.retainLater = false
	if j.snapFile != nil {
		_ = j.snapFile.Close()
		j.snapFile = nil
	}
	j.replay = nil
	j.started = true
}

// Snapshot returns the newest snapshot's payload and the index of the last
// record it covers, or ok false if there is none (or recovery is over:
// Append or CreateSnapshot has been called). Open checked the file's
// header and length, not its payload (with Options.Repair, the whole
// file): the reader checks the CRC as it streams and returns an error
// wrapping ErrCorrupt instead of io.EOF if it does not match. The caller
// must not trust what it read until it has had io.EOF; on ErrCorrupt it
// calls RejectSnapshot, and opens the journal again. Closing the reader is
// optional; the first Append closes the file under it.
func (j *Journal) Snapshot() (data io.ReadCloser, index uint64, ok bool) {
	if j.closed || j.started || j.snapFile == nil {
		return nil, 0, false
	}
	r := newSnapReader(j.snapFile, j.snapIndex, j.snapLen)
	r.good = &j.snapRead
	prefetch(j.snapFile, snapHeader+j.snapLen+snapTrailer)
	return r, j.snapIndex, true
}

// Checkpointed returns what the TAIL file recorded at the last Checkpoint
// before Open (Tail.Note: the caller's value then), and whether Open found
// a good one. It is checked by its own CRC, not the snapshot's.
func (j *Journal) Checkpointed() (Tail, bool) { return j.tail, j.tailOK }

// RejectSnapshot is for a caller whose read of Snapshot failed with an
// error wrapping ErrCorrupt, before the first Append or CreateSnapshot: it
// closes the journal and sets the snapshot file aside (renamed *.corrupt,
// logged with cause). Open then falls back to the previous snapshot and
// the log after it, which Open kept: it deletes no snapshot, and no
// segment, until the snapshot it picked has been read whole and found
// good. It fails if there is no snapshot or recovery is over.
func (j *Journal) RejectSnapshot(cause error) error {
	if j.closed || j.started || j.snapFile == nil {
		return errors.New("journal: RejectSnapshot without a snapshot being recovered")
	}
	path := j.snapPath(j.snapIndex)
	if err := j.Close(); err != nil {
		return err
	}
	return j.setAside(path, cause)
}

// Healthy returns nil, or the error that left appended records unwritten
// (or unsynced after a failed fsync) in memory. The journal retries them on
// every Append and Sync; Healthy becomes nil again once they are written
// and, after a failed fsync (the loop's or the background one's), once a
// Sync has fsynced them: the bytes a failed fsync should have made durable
// may be gone from the kernel's cache, so they are written again from
// memory and only a later fsync that succeeds makes them durable (see
// rewind).
func (j *Journal) Healthy() error {
	if j.closed {
		return ErrClosed
	}
	if j.err != nil {
		return j.err
	}
	if j.syncBad != nil {
		return j.syncFailure()
	}
	j.smu.Lock()
	defer j.smu.Unlock()
	if j.syncErr != nil {
		return fmt.Errorf("journal: background fsync: %w", j.syncErr)
	}
	return nil
}

// LastIndex returns the index of the last record appended (or covered by
// the snapshot, before any Append); 0 if there is none.
func (j *Journal) LastIndex() uint64 { return j.last }

// Stats is a point-in-time view of the journal, for metrics.
type Stats struct {
	LastIndex        uint64        // last index handed out
	DurableIndex     uint64        // last index known fsynced (SyncNo: written)
	Unwritten        int           // records waiting in memory (while unhealthy)
	UnwrittenBytes   int64         // their size
	Segments         int           // log segment files
	LogBytes         int64         // their total size
	LogSinceSnapshot int64         // bytes of the segments after the newest snapshot
	SnapshotIndex    uint64        // index covered by the newest snapshot; 0 if none
	SnapshotBytes    int64         // its file size
	SnapshotAge      time.Duration // since it was committed (its file's mtime); 0 if none
	Syncs, SyncFails uint64        // fsyncs of the active segment, and failed ones
	LastSync         time.Duration // how long the last fsync took
	SyncTime         time.Duration // all fsyncs' durations added up
	SyncCounts       SyncCounts    // fsyncs by duration (see SyncBuckets)
}

// Stats returns the journal's current figures.
func (j *Journal) Stats() Stats {
	s := Stats{LastIndex: j.last, DurableIndex: j.durIdx}
	for i := j.q.next; i < len(j.q.ents); i++ {
		s.Unwritten++
		s.UnwrittenBytes += int64(j.q.ents[i].n)
	}
	j.mu.Lock()
	s.Segments = len(j.closedSeg) + 1
	s.LogBytes = j.act.size
	s.LogSinceSnapshot = j.act.size
	for _, c := range j.closedSeg {
		s.LogBytes += c.size
		if c.id >= j.snapSeg {
			s.LogSinceSnapshot += c.size
		}
	}
	if n := len(j.snaps); n > 0 {
		sn := j.snaps[n-1]
		s.SnapshotIndex, s.SnapshotBytes, s.SnapshotAge = sn.index, sn.size, time.Since(sn.mtime)
	}
	j.mu.Unlock()
	j.smu.Lock()
	s.Syncs, s.SyncFails, s.LastSync = j.syncs, j.syncFails, j.lastSync
	s.SyncTime, s.SyncCounts = j.syncSum, j.syncHist
	if j.opts.Sync == SyncEverySec {
		s.DurableIndex = max(s.DurableIndex, j.durable)
	}
	j.smu.Unlock()
	return s
}

// Close writes what it can of any unwritten records, cuts a preallocated
// tail off the active segment, fsyncs the log and closes every file. It returns an error if records are left unwritten or
// the final fsync fails. A SnapshotWriter still open then fails its Commit
// with ErrClosed. Close is idempotent.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	if j.stop != nil {
		close(j.stop)
		<-j.done
	}
	j.mu.Lock()
	j.shut = true
	j.mu.Unlock()
	var errs []error
	if err := j.flush(); err != nil {
		errs = append(errs, fmt.Errorf("journal: %d records left unwritten at Close: %w",
			len(j.q.ents)-j.q.next, err))
	}
	j.waitDeletions()
	trimmed := j.alloc > j.act.size
	if err := j.trimActive(); err != nil {
		errs = append(errs, err)
	}
	if err := j.syncActive(); err != nil {
		errs = append(errs, err)
	} else if trimmed && j.sf != nil {
		if err := j.fsync(j.sf); err != nil {
			errs = append(errs, fmt.Errorf("journal: fsync: %w", err))
		}
	}
	if len(errs) == 0 && j.tailOn {
		// Every record is durable: a bad record found later is damage,
		// never a torn tail (tornTail).
		j.smu.Lock()
		d := j.durable
		j.smu.Unlock()
		if err := j.writeTail(Tail{Durable: d, Last: j.last, Note: j.note}, false); err != nil {
			j.log.Warn("journal: cannot write the TAIL file at Close", "err", err)
		}
	}
	j.release()
	j.closed = true
	return errors.Join(errs...)
}
