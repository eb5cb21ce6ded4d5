package server

import (
	"errors"
	"runtime"
	"sync/atomic"
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
	// records, firings and replayNs are persist's counts it covers,
	// given back if it fails.
	records  int
	firings  uint64
	replayNs int64
	began    time.Time     // when it was taken
	pause    time.Duration // how long taking the copy stopped the loop
	// procs is GOMAXPROCS before the encoder's own P was added (0: none
	// was); the loop puts it back once the snapshot is done.
	procs int
	// hurry is set by whoever waits for the snapshot (waitSnapshot: at
	// start, at a graceful stop, snapshotNow): an encoder at SCHED_IDLE
	// hands the rest to normal priority at its next piece, as after
	// idle_max. A waited-for snapshot is on a caller's critical path, and
	// where other work keeps the CPUs busy an idle thread gets almost no
	// CPU: a graceful stop waited up to idle_max (30 s) for a last
	// snapshot of a few kilobytes.
	hurry atomic.Bool
	bytes int64
	err   error
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
	return s.startSnapshotAt(encoderSchedOf(s.cfg.Snapshot))
}

// startSnapshotAt is startSnapshot with the encoder at sched: a snapshot
// that is waited for at once (snapshotNow, the first one) runs at normal
// priority (snapshot.nice), not at SCHED_IDLE.
func (s *Server) startSnapshotAt(sched encoderSched) error {
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
		records: p.records, firings: p.firings, replayNs: p.replayNs}
	run.pause = time.Since(began)
	p.snap, p.records, p.firings, p.replayNs = run, 0, 0, 0
	sw := newSnapshotWrite(w, run.snap)
	if sched.idle {
		run.procs = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(run.procs + 1) // the encoder's own P (see encoderSched)
		sw.yield = false
	}
	go s.encodeSnapshot(run, sw, sched)
	return nil
}

// snapshotStream is what encodeSnapshot writes a snapshot through: a
// *snapshotWrite (tests give it pieces of their own).
type snapshotStream interface {
	// write writes the snapshot to its end and finishes it (true), or
	// stops when keepOn (if not nil) returns false between two pieces
	// (false: call again for the rest, from any goroutine).
	write(keepOn func() bool) bool
	// result is the bytes written and, once finished, the error (nil when
	// committed).
	result() (int64, error)
}

// encoderSched is how the kernel schedules the thread that encodes a
// snapshot (snapshot.priority, snapshot.nice, snapshot.idle_max; apply is
// in snapnice_*.go).
//
// An idle encoder also brings its own P: GOMAXPROCS is one more while it
// runs (startSnapshot, pollSnapshot), and it does not yield between pieces.
// A goroutine holds its P while the kernel leaves its thread waiting, and
// an idle thread waits whenever anything else wants its CPU: without a P
// of its own the encoder's would be lost to the loop and the ticker
// exactly when they wake, leaving them one P for both (the ticker's
// goroutine, woken by the timerfd, waited for it up to 6 ms); and a locked
// goroutine's yield hands its P to another thread and back, a wake-up of
// a normal-priority thread for every piece.
type encoderSched struct {
	idle    bool          // SCHED_IDLE (Linux)
	nice    int           // else this nice value, if over 0
	idleMax time.Duration // how long at SCHED_IDLE before the rest goes on at nice
}

// encoderSchedOf is the encoder's scheduling that policy (completed by
// persistenceDefaults) asks for.
func encoderSchedOf(policy SnapshotPolicy) encoderSched {
	return encoderSched{idle: idleSupported && policy.Priority == SnapshotIdle, nice: policy.Nice, idleMax: policy.IdleMax}
}

// waitedSched is the encoder's scheduling for a snapshot its caller waits
// for: never SCHED_IDLE (see snapshotRun.hurry).
func waitedSched(policy SnapshotPolicy) encoderSched {
	return encoderSched{nice: policy.Nice}
}

// encodeSnapshot writes run's snapshot through sw on the calling
// goroutine, at sched's priority, and closes run.done. An encoder at
// SCHED_IDLE that is still writing after sched.idleMax (where other work
// keeps every CPU busy it gets almost no CPU) hands the rest to a new
// goroutine at normal priority (sched.nice), and this one returns, which
// ends its thread (apply locked it): so a snapshot, and the log's growth
// until it is done, stays bounded by about idle_max plus its time at
// normal priority.
func (s *Server) encodeSnapshot(run *snapshotRun, sw snapshotStream, sched encoderSched) {
	if err := sched.apply(); err != nil {
		s.log.Warn("snapshot: cannot lower the encoder's priority (snapshot.priority, snapshot.nice): it competes with the event loop", "err", err)
		sched.idle = false
	}
	if sched.idle {
		until := time.Now().Add(sched.idleMax)
		if !sw.write(func() bool { return !run.hurry.Load() && time.Now().Before(until) }) {
			n, _ := sw.result()
			if run.hurry.Load() {
				s.log.Debug("snapshot: waited for; the rest of it is written at normal priority", "bytes_so_far", n)
			} else {
				s.log.Warn("snapshot: the encoder got too little CPU at idle priority; the rest of this snapshot is written at normal priority",
					"idle_max", sched.idleMax, "bytes_so_far", n)
			}
			go s.encodeSnapshot(run, sw, encoderSched{nice: sched.nice})
			return
		}
	} else {
		sw.write(nil)
	}
	run.bytes, run.err = sw.result()
	close(run.done)
}

// snapshotNow writes a snapshot of the state as it is, and waits for it:
// after one that is running, whatever the interval since the last. Runs on
// the loop, right after a commit (no input waits for a record).
func (s *Server) snapshotNow() error {
	_ = s.waitSnapshot() // a failure is logged; this one is another try
	s.persist.snapRetryAt = 0
	if err := s.startSnapshotAt(waitedSched(s.cfg.Snapshot)); err != nil {
		return err
	}
	return s.waitSnapshot()
}

// snapshotWrite is a snapshot being streamed into its file: owned by the
// goroutine that encodes it (handed over whole, never shared).
type snapshotWrite struct {
	w    *journal.SnapshotWriter
	snap *session.Snapshot
	buf  []byte
	n    int64 // bytes written to w so far
	err  error // once finished: nil when committed
	// yield: runtime.Gosched between pieces (true unless the encoder has
	// a P of its own).
	yield bool
}

func newSnapshotWrite(w *journal.SnapshotWriter, snap *session.Snapshot) *snapshotWrite {
	snap.SetYield(runtime.Gosched) // also while it sorts the timers, before the first piece
	return &snapshotWrite{w: w, snap: snap, buf: make([]byte, 0, snapshotChunk+snapshotPiece), yield: true}
}

func (sw *snapshotWrite) result() (int64, error) { return sw.n, sw.err }

// write streams the snapshot into its file and commits it, or aborts it
// (sw.err), and returns true; or, when keepOn (if not nil) returns false
// between two pieces, returns false with the rest to write: call again.
// It encodes in pieces of snapshotPiece bytes and, with sw.yield, yields
// the P between them: an encoder sharing the loop's Ps (GOMAXPROCS 1, a
// pinned server, at snapshot.priority normal) that never yields keeps the
// event loop from its turn until the scheduler preempts it, up to 10 ms
// later, and every firing due meanwhile is late by that much.
func (sw *snapshotWrite) write(keepOn func() bool) bool {
	for {
		var done bool
		sw.buf, done = sw.snap.AppendNext(sw.buf, snapshotPiece)
		if sw.yield {
			runtime.Gosched()
		}
		if len(sw.buf) >= snapshotChunk || done {
			if _, err := sw.w.Write(sw.buf); err != nil {
				sw.w.Abort()
				sw.err = err
				return true
			}
			sw.n += int64(len(sw.buf))
			sw.buf = sw.buf[:0]
		}
		if done {
			sw.err = sw.w.Commit()
			return true
		}
		if keepOn != nil && !keepOn() {
			return false
		}
	}
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
	if run.procs > 0 {
		runtime.GOMAXPROCS(run.procs)
	}
	run.snap.Release()
	if run.err != nil {
		p.records += run.records // still to be covered
		p.firings += run.firings
		p.replayNs += run.replayNs
		s.snapshotFailed(run.err)
		return
	}
	s.persist.gap = false
	if s.persist.marked {
		s.clearRecoveryMark()
	}
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
	run.hurry.Store(true)
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
