package server

import (
	"errors"
	"runtime"
	"time"

	"github.com/tickwheel/tickwheel/server/journal"
	"github.com/tickwheel/tickwheel/session"
)

// snapshotRun is a snapshot being written by its own goroutine from the
// core's immutable copy. done is closed when it has finished; the other
// fields are the goroutine's until then.
type snapshotRun struct {
	snap  *session.Snapshot
	done  chan struct{}
	index uint64 // the last log record it covers
	// records and firings are persist's counts it covers, given back
	// if it fails.
	records int
	firings uint64
	began   time.Time     // when it was taken
	pause   time.Duration // how long taking the copy stopped the loop
	bytes   int64
	err     error
}

// A snapshot is encoded snapshotPiece bytes at a time, and written to its
// file snapshotChunk bytes at a time.
const (
	snapshotPiece = 64 << 10
	snapshotChunk = 1 << 20
)

// snapshotPoll is how often the loop checks whether a snapshot has finished.
const snapshotPoll = 100 * time.Millisecond

// snapshotRetry is how long a failed snapshot waits before another try.
const snapshotRetry = 10 * time.Second

// startSnapshot takes an immutable copy of the state, covering every log
// record so far, and writes it from another goroutine. The loop stops only
// for the copy (its duration is logged). Runs on the loop, after commit
// (no input is pending a record).
func (s *Server) startSnapshot() error {
	p := s.persist
	if p.snap != nil || s.nowNs() < p.snapRetryAt {
		return nil
	}
	index := p.j.LastIndex()
	w, err := p.j.CreateSnapshot(index)
	if err != nil {
		s.snapshotFailed(err)
		return err
	}
	p.snapStartAt = s.nowNs()
	p.snapRetryAt = p.snapStartAt + int64(s.cfg.Snapshot.MinInterval)
	began := time.Now()
	run := &snapshotRun{snap: s.core.Snapshot(), done: make(chan struct{}), index: index, began: began,
		records: p.records, firings: p.firings}
	run.pause = time.Since(began)
	p.snap, p.records, p.firings = run, 0, 0
	nice := s.cfg.Snapshot.Nice
	go func() {
		defer close(run.done)
		if err := lowerPriority(nice); err != nil { // snapnice_linux.go: this goroutine's thread only
			s.log.Warn("snapshot: cannot lower the encoder's priority (snapshot.nice): it competes with the event loop", "err", err)
		}
		run.bytes, run.err = writeSnapshot(w, run.snap)
	}()
	return nil
}

// snapshotNow writes a snapshot of the state as it is, and waits for it:
// after one that is running, whatever the interval since the last. Runs on
// the loop, right after a commit (no input waits for a record).
func (s *Server) snapshotNow() error {
	_ = s.waitSnapshot() // a failure is logged; this one is another try
	s.persist.snapRetryAt = 0
	if err := s.startSnapshot(); err != nil {
		return err
	}
	return s.waitSnapshot()
}

// writeSnapshot streams snap into w and commits it, or aborts it. It
// encodes in pieces of snapshotPiece bytes and yields the CPU between
// them: with one CPU for the process (GOMAXPROCS 1, a pinned server), an
// encoder that never yields keeps the event loop from its turn until the
// scheduler preempts it, up to 10 ms later, and every firing due meanwhile
// is late by that much.
func writeSnapshot(w *journal.SnapshotWriter, snap *session.Snapshot) (int64, error) {
	buf := make([]byte, 0, snapshotChunk+snapshotPiece)
	snap.SetYield(runtime.Gosched) // also while it sorts the timers, before the first piece
	var n int64
	for done := false; !done; {
		buf, done = snap.AppendNext(buf, snapshotPiece)
		runtime.Gosched()
		if len(buf) < snapshotChunk && !done {
			continue
		}
		if _, err := w.Write(buf); err != nil {
			w.Abort()
			return n, err
		}
		n += int64(len(buf))
		buf = buf[:0]
	}
	return n, w.Commit()
}

// pollSnapshot reports a finished snapshot and releases its copy. Runs on
// the loop.
func (s *Server) pollSnapshot() {
	p := s.persist
	if p.snap == nil {
		return
	}
	select {
	case <-p.snap.done:
	default:
		return
	}
	run := p.snap
	p.snap = nil
	run.snap.Release()
	if run.err != nil {
		p.records += run.records // still to be covered
		p.firings += run.firings
		s.snapshotFailed(run.err)
		return
	}
	s.persist.gap = false
	s.persist.snapshots++
	s.persist.snapDone, s.persist.snapTook = time.Now(), time.Since(run.began)
	s.log.Info("snapshot written", "index", run.index, "bytes", run.bytes, "timers", run.snap.Timers(),
		"took", time.Since(run.began).Round(time.Millisecond), "loop_pause", run.pause.Round(time.Microsecond))
}

// waitSnapshot waits for the running snapshot, if any, and returns its error.
func (s *Server) waitSnapshot() error {
	p := s.persist
	if p.snap == nil {
		return nil
	}
	run := p.snap
	<-run.done
	s.pollSnapshot()
	return run.err
}

// snapshotFailed logs a failed snapshot; the previous one and the log
// still hold everything, and another is tried after snapshotRetry.
func (s *Server) snapshotFailed(err error) {
	s.persist.snapRetryAt = s.nowNs() + int64(snapshotRetry)
	s.persist.snapFailAt = s.persist.snapRetryAt
	if errors.Is(err, journal.ErrClosed) {
		return
	}
	s.log.Error("snapshot failed; the previous snapshot and the log still hold the state", "err", err, "retry_in", snapshotRetry)
}
