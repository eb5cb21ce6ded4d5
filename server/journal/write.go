package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

const blockSize = 32 << 10 // the library's block size

// entry is one appended record in the queue.
type entry struct {
	index  uint64
	off, n int    // its encoded bytes in queue.buf
	seg    uint32 // segment it was written to, once written
	end    int64  // its end offset in seg, once written
}

// queue holds the records that are not yet durable: written ones from head
// to next (kept so that a failed fsync can be repaired by writing them
// again), unwritten ones from next on. Its buffers are reused, so a steady
// Append allocates nothing here.
type queue struct {
	buf        []byte
	ents       []entry
	head, next int
}

func (q *queue) push(index uint64, rec []byte) {
	off := len(q.buf)
	q.buf = binary.AppendUvarint(q.buf, index)
	q.buf = append(q.buf, rec...)
	q.ents = append(q.ents, entry{index: index, off: off, n: len(q.buf) - off})
}

func (q *queue) data(e *entry) []byte { return q.buf[e.off : e.off+e.n] }

// unwrittenBytes is the size of the records not yet written.
func (q *queue) unwrittenBytes() int64 {
	if q.next == len(q.ents) {
		return 0
	}
	return int64(len(q.buf) - q.ents[q.next].off)
}

// liveBytes is the size of every record still held (written or not).
func (q *queue) liveBytes() int64 {
	if q.head == len(q.ents) {
		return 0
	}
	return int64(len(q.buf) - q.ents[q.head].off)
}

// trim drops the written records with index <= upto and returns the last
// one dropped (ok false if none). It compacts the buffers when they are
// mostly dead, so the queue's memory stays about that of the live records.
func (q *queue) trim(upto uint64) (last entry, ok bool) {
	for q.head < q.next && q.ents[q.head].index <= upto {
		last, ok = q.ents[q.head], true
		q.head++
	}
	if !ok {
		return last, false
	}
	if q.head == len(q.ents) {
		q.buf, q.ents, q.head, q.next = q.buf[:0], q.ents[:0], 0, 0
	} else if q.head >= 256 && q.head*2 >= len(q.ents) {
		base := q.ents[q.head].off
		n := copy(q.buf, q.buf[base:])
		q.buf = q.buf[:n]
		m := copy(q.ents, q.ents[q.head:])
		q.ents = q.ents[:m]
		for i := range q.ents {
			q.ents[i].off -= base
		}
		q.next -= q.head
		q.head = 0
	}
	return last, true
}

// Append adds one record and returns its index, consecutive from 1 across
// restarts. It writes the record (and any earlier unwritten ones) to the
// operating system but does not fsync it (see Sync and the SyncPolicy).
//
// If index != 0 the record is the journal's: on a write error Append
// returns (index, err), keeps the record in memory, reports err through
// Healthy, and writes it, in order, on a later Append, Sync or Close. If
// index == 0 the record was refused: ErrClosed, ErrTooLarge, or
// ErrBacklogFull. rec is copied; the caller may reuse it.
//
// After a failed fsync, until a Sync succeeds, Append also returns
// (index, err) with the record written: it is not known durable, nor are
// the ones written since the last good fsync (the server stops
// acknowledging changes until Healthy is nil).
func (j *Journal) Append(rec []byte) (index uint64, err error) {
	if j.closed {
		return 0, ErrClosed
	}
	if len(rec) > j.maxRec {
		return 0, ErrTooLarge
	}
	if j.err != nil && j.q.unwrittenBytes()+int64(len(rec)) > j.opts.MaxBacklog {
		return 0, ErrBacklogFull
	}
	if !j.started {
		j.endRecovery()
	}
	j.last++
	j.q.push(j.last, rec)
	if err := j.flush(); err != nil {
		return j.last, err
	}
	if j.syncBad != nil {
		return j.last, j.syncFailure()
	}
	return j.last, nil
}

// syncFailure is the error Append and Healthy report while syncBad is set.
func (j *Journal) syncFailure() error {
	return fmt.Errorf("journal: fsync failed, and none has succeeded since: %w", j.syncBad)
}

// flush writes every unwritten record, after repairing whatever an earlier
// failure left behind. On error the journal is unhealthy and the records
// stay queued.
func (j *Journal) flush() error {
	if err := j.settle(); err != nil {
		return j.fail(err)
	}
	for j.q.next < len(j.q.ents) {
		if err := j.writeEntry(); err != nil {
			return j.fail(err)
		}
		j.wIdx = j.q.ents[j.q.next].index
		j.q.next++
	}
	j.err = nil
	switch j.opts.Sync {
	case SyncNo:
		if j.syncBad == nil { // else kept until a Sync succeeds
			j.markDurable(j.wIdx)
		}
		return nil
	case SyncEverySec:
		j.smu.Lock()
		more := j.written != j.wIdx
		j.written = j.wIdx
		d := j.durable
		j.smu.Unlock()
		j.markDurable(d)
		if more {
			j.signalWrote()
		}
	}
	return j.boundUnsynced()
}

// boundUnsynced keeps the copies of unsynced records within
// Options.MaxBacklog: past a quarter of it SyncEverySec's fsync is started
// early; past all of it (the disk cannot keep up, or with SyncAlways the
// caller has not called Sync for that long) the loop fsyncs itself.
func (j *Journal) boundUnsynced() error {
	live := j.q.liveBytes()
	switch {
	case live > j.opts.MaxBacklog:
		if err := j.syncActive(); err != nil {
			j.rewind(err)
			return j.fail(err)
		}
	case live > j.opts.MaxBacklog/4:
		select {
		case j.nudge <- struct{}{}: // nil, never ready, unless SyncEverySec
		default:
		}
	}
	return nil
}

func (j *Journal) fail(err error) error {
	if j.err == nil {
		j.log.Error("journal: write failed; records kept in memory and retried",
			"err", err, "unwritten", len(j.q.ents)-j.q.next)
	}
	j.err = err
	return err
}

// markDurable records that every written record <= idx is durable.
func (j *Journal) markDurable(idx uint64) {
	if idx <= j.durIdx {
		return
	}
	j.durIdx = idx
	if e, ok := j.q.trim(idx); ok && e.seg == j.act.id {
		j.durOff = e.end
	}
}

// settle undoes what a failure left: it acts on a failed background fsync
// and cuts a partial write off the active segment; and it deletes the
// segments a committed snapshot has made deletable.
func (j *Journal) settle() error {
	if j.opts.Sync == SyncEverySec {
		j.smu.Lock()
		serr := j.syncErr
		j.smu.Unlock()
		if serr != nil {
			j.rewind(serr)
		}
	}
	if j.sf == nil || j.dirty {
		if err := j.cutActive(); err != nil {
			return err
		}
	}
	if j.maint.Load() {
		j.maintain()
	}
	return nil
}

// cutActive truncates the active segment to the size of its good records
// (dropping any preallocated tail with the bytes of a failed write),
// (re)opening our descriptor on it if needed.
func (j *Journal) cutActive() error {
	if j.sf == nil {
		f, err := j.opts.FS.OpenFile(j.segPath(j.act.id), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		j.smu.Lock()
		j.sf = f
		j.smu.Unlock()
	}
	if err := j.sf.Truncate(j.act.size); err != nil {
		return fmt.Errorf("journal: cutting %s back to %d bytes: %w", j.sf.Name(), j.act.size, err)
	}
	j.alloc = j.act.size
	if j.dirty {
		j.log.Info("journal: cut the active segment back to its good records",
			"file", j.sf.Name(), "size", j.act.size)
	}
	j.dirty = false
	return nil
}

// rewind treats every written but not durable record as unwritten, after a
// failed fsync (err): the kernel may have dropped those pages, or marked
// them clean, and a later fsync could succeed without writing them
// (PostgreSQL's "fsyncgate"). The active segment is cut back to its
// durable records and the records are written again from memory, which
// dirties their pages anew; the journal stays unhealthy (syncBad) until an
// fsync of the loop's (Sync) succeeds after that.
func (j *Journal) rewind(err error) {
	if j.syncBad == nil {
		j.log.Error("journal: fsync failed; the records since the last good fsync are written again from memory, and the log is unhealthy until an fsync succeeds",
			"err", err, "not_durable", j.last-j.durIdx)
	}
	j.syncBad = err
	j.smu.Lock()
	j.gen++
	d := j.durable
	j.syncErr = nil
	j.smu.Unlock()
	j.markDurable(d)
	if j.q.next == j.q.head {
		return // nothing written since the last durable point
	}
	j.q.next = j.q.head
	j.wIdx = j.durIdx
	j.act.size = j.durOff
	if j.durOff == 0 {
		j.act.first, j.act.last = 0, 0
	} else {
		j.act.last = j.durIdx
	}
	j.smu.Lock()
	j.written = j.wIdx
	j.smu.Unlock()
	j.dirty = true
}

// maintain deletes the segments a committed snapshot has made deletable
// (the journal holds no descriptor on them: only on the active segment),
// on a goroutine of its own: the caller is the server's event loop
// (Append), and unlinking them while a big snapshot was being written
// held the loop 148 ms at 10M timers (docs/BENCHMARKS.md, "Loop pauses and
// lateness at 100M"). One batch is deleted at a time, oldest first, so
// the directory always holds a suffix of the log; Close waits for it. A
// crash before the deletion leaves covered segments, which the next Open
// deletes.
func (j *Journal) maintain() {
	if j.deleting != nil {
		select {
		case <-j.deleting:
			j.deleting = nil
		default:
			return // one batch at a time, in order: maint stays set for the next call
		}
	}
	j.mu.Lock()
	del := j.toDelete
	j.toDelete = nil
	j.maint.Store(false)
	j.mu.Unlock()
	if len(del) == 0 {
		return
	}
	done := make(chan struct{})
	j.deleting = done
	go func() {
		defer close(done)
		for _, p := range del {
			j.remove(p)
		}
		if err := j.opts.FS.SyncDir(j.dir); err != nil {
			j.log.Warn("journal: fsync of the directory after deleting segments", "err", err)
		}
		j.log.Info("journal: deleted log segments covered by snapshots", "files", len(del))
	}()
}

// waitDeletions waits until the segments maintain is deleting are gone.
// Called on the loop (Close).
func (j *Journal) waitDeletions() {
	if j.deleting != nil {
		<-j.deleting
		j.deleting = nil
	}
}

// writeEntry writes the queue's next record and notes where it went.
func (j *Journal) writeEntry() error {
	end, err := j.writeRec(j.q.data(&j.q.ents[j.q.next]))
	if err != nil {
		j.dirty = true
		return err
	}
	e := &j.q.ents[j.q.next] // writeRec may have rotated, which compacts the queue
	e.seg = j.act.id
	e.end = end
	j.act.size = end
	if j.act.first == 0 {
		j.act.first = e.index
	}
	j.act.last = e.index
	return nil
}

// Sync makes every appended record durable: it writes any unwritten ones,
// fsyncs the directory if a segment was created, then fsyncs the active
// segment (earlier segments were fsynced when they were closed). On error
// the records not known durable are kept in memory, the active segment is
// cut back to the durable ones, Healthy reports the error, and the next
// Append or Sync writes them again.
func (j *Journal) Sync() error {
	if j.closed {
		return ErrClosed
	}
	if err := j.flush(); err != nil {
		return err
	}
	if err := j.syncActive(); err != nil {
		j.rewind(err)
		return j.fail(err)
	}
	return nil
}

// syncActive fsyncs the directory (if needed) and the active segment, then
// marks what was written durable.
func (j *Journal) syncActive() error {
	j.smu.Lock()
	dd := j.dirDirty
	j.smu.Unlock()
	if j.wIdx == j.durIdx && !dd && j.opts.Sync != SyncNo && j.syncBad == nil {
		return nil
	}
	if err := j.fsyncActive(); err != nil {
		return err
	}
	j.smu.Lock()
	j.durable = max(j.durable, j.wIdx)
	j.smu.Unlock()
	j.markDurable(j.wIdx)
	if j.syncBad != nil {
		j.log.Info("journal: an fsync succeeded again; every written record is durable", "index", j.wIdx)
		j.syncBad = nil
	}
	return nil
}

// fsyncActive is the loop's fsync of the active segment (Sync, a full
// segment's rotation, the backlog bound), after the directory's if a
// segment was created since its last fsync. It succeeds only if every byte
// written to the segment so far is durable: a background fsync that
// failed since the loop last looked (settle) may have dropped pages that
// this fsync then finds clean, so its failure is returned instead of this
// one's success, and the caller rewinds (the records are written again).
// fmu makes a background fsync that is running finish and record its
// result first. The caller marks records durable.
func (j *Journal) fsyncActive() error {
	if j.sf == nil {
		return errors.New("journal: active segment not open")
	}
	j.fmu.Lock()
	defer j.fmu.Unlock()
	j.smu.Lock()
	dd := j.dirDirty
	j.smu.Unlock()
	start := time.Now()
	var err error
	if dd {
		err = j.opts.FS.SyncDir(j.dir)
	}
	if err == nil {
		err = j.fsync(j.sf)
	}
	j.smu.Lock()
	defer j.smu.Unlock()
	j.noteSync(time.Since(start))
	if err != nil {
		j.syncFails++
		return fmt.Errorf("journal: fsync: %w", err)
	}
	if dd {
		j.dirDirty = false
	}
	if j.syncErr != nil {
		return fmt.Errorf("journal: an earlier background fsync failed (this one's success does not cover the pages it may have dropped): %w", j.syncErr)
	}
	return nil
}

// fsync makes the file's written bytes durable (vfs.File.Sync).
func (j *Journal) fsync(f vfs.File) error { return f.Sync() }

// syncLoop is SyncEverySec's goroutine. It fsyncs its own descriptor of the
// active segment: the library writes each record with one write(2) and keeps
// nothing buffered, so this covers every record written before the fsync
// started, without taking the library's mutex or blocking Append.
//
// It fsyncs once a write was signalled (wrote: records written, or a
// segment created), at most once every period (from Open, then from the
// start of the last fsync), or at once when nudged. A journal nobody
// writes to leaves it asleep: no wake-up a second on an idle server
// (docs/BENCHMARKS.md, "Idle CPU: the wake-ups that are left").
func (j *Journal) syncLoop(every time.Duration) {
	defer close(j.done)
	last := time.Now()
	t := time.NewTimer(every)
	t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-j.nudge:
		case <-j.wrote:
			if wait := time.Until(last.Add(every)); wait > 0 {
				t.Reset(wait)
				select {
				case <-j.stop:
					t.Stop()
					return
				case <-t.C:
				case <-j.nudge:
					t.Stop()
				}
			}
		}
		j.passes.Add(1)
		last = time.Now() // a period from the fsync's start: a slow disk's fsync does not stretch it
		j.backgroundSync()
	}
}

// signalWrote tells the syncer there is something to fsync. On the loop.
func (j *Journal) signalWrote() {
	select {
	case j.wrote <- struct{}{}: // nil, never ready, unless SyncEverySec
	default:
	}
}

func (j *Journal) backgroundSync() {
	j.fmu.Lock() // see fsyncActive
	defer j.fmu.Unlock()
	j.smu.Lock()
	f, gen, idx, dd := j.sf, j.gen, j.written, j.dirDirty
	need := f != nil && j.syncErr == nil && (idx > j.durable || dd)
	j.smu.Unlock()
	if !need {
		return
	}
	start := time.Now()
	var err error
	if dd {
		err = j.opts.FS.SyncDir(j.dir)
	}
	if err == nil {
		err = j.fsync(f)
	}
	j.smu.Lock()
	defer j.smu.Unlock()
	j.noteSync(time.Since(start))
	if f != j.sf {
		return // rotated meanwhile: the rotation fsynced f itself (fsyncActive)
	}
	if err != nil {
		// Recorded even if the loop rewound meanwhile (gen): the records
		// it wrote again may be among the pages this fsync dropped.
		j.syncFails++
		j.syncErr = err
		return
	}
	if gen != j.gen {
		return // rewound meanwhile: idx may name records written again since
	}
	if dd {
		j.dirDirty = false
	}
	j.durable = max(j.durable, idx)
}

// syncDir fsyncs a directory with the os package, for Open and snapshots
// (the log's writes go through Options.FS).
func syncDir(dir string) error { return vfs.OS{}.SyncDir(dir) }
