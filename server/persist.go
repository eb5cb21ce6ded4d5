package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/server/journal"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// Durability. Every event-loop turn that changed state leaves one record in
// the write-ahead log (server/journal): the session core's inputs of that
// turn (session.Core.TakeRecord). commit appends it at the end of the turn,
// before the turn's output is flushed; with fsync always it also fsyncs
// when the turn answered a request that changed state (group commit: one
// fsync for the whole turn). Snapshots of the whole state are taken every
// snapshot.every_records records or snapshot.every_bytes bytes of log, from
// an immutable copy written by another goroutine, and the log they cover
// is deleted. Start-up loads the newest valid snapshot, replays the log
// after it, closes the sessions of the process that wrote it, and sets
// tw-time by the downtime mode.
//
// When the log cannot be written (a full disk), the journal keeps the
// records in memory and retries; meanwhile the core refuses changes to
// timers (code unavailable), the sessions whose replies need the unwritten
// record wait for it, and everything else (reads, firings, other replies)
// goes on. Once a write succeeds, the held replies leave and changes are
// accepted again.

// logDir is the log's directory in the data directory.
const logDir = "log"

// logPreallocate is the step in which the active log segment's file grows
// ahead of its records, zeros written (journal.Options.Preallocate): an
// fdatasync then writes the records only, not the file system's journal
// (a new size, new blocks), but once per step; with fsync always that took
// the server's fdatasync from ~190 to ~140 µs. Small, so that a full disk
// shows within a few KiB of records (the file cannot grow) as it did.
const logPreallocate = 64 << 10

// retryEvery is how often an unwritable log is tried again.
const retryEvery = 200 * time.Millisecond

// wallEvery is how often the loop records the wall-clock time with tw-time
// (session.Core.SetWall), so that a restart knows how long it was down,
// in turns that record something anyway (and always in a cluster).
const wallEvery = time.Second

// wallIdleEvery is how often a single node records the pairing when
// nothing else is recorded, and idleAfter how long after its last record
// its loop stops waking once a second for it (by then the log's fsync and
// the TAIL checkpoint after it are done). tw-time runs on the monotonic
// clock, which NTP slews as it slews the wall clock, so a pairing holds
// until the wall clock is stepped (or the speed changes, a freeze or a
// fast-forward, which record a new one at once): a restart computes the
// same downtime from an older pairing. A pairing each second woke an idle
// server each second for a 34-byte record, its fsync and the TAIL write:
// 40% of its idle CPU (docs/BENCHMARKS.md, "Flat at 100M").
const (
	wallIdleEvery = time.Minute
	idleAfter     = 3 * time.Second
)

// persist is the server's log and snapshot state. Owned by the event loop,
// except the snapshot goroutine's result channel.
type persist struct {
	s      *Server
	j      *journal.Journal
	policy journal.SyncPolicy
	// failing is the write error that made the core read-only, or nil.
	failing error
	retryAt int64 // ns since origin: when to try the log again
	// records counts the records since the last snapshot began, firings
	// the timers they fired (session.RecordFirings), and replayNs the
	// loop's time making them (Server.turnCost): what a restart would
	// replay (snapshot.every_firings, snapshot.every_replay).
	records     int
	firings     uint64
	replayNs    int64
	snap        *snapshotRun // the snapshot being written, or nil
	snapRetryAt int64        // ns since origin: no snapshot is started before it
	snapStartAt int64        // ns since origin: when the last snapshot started (0: none since start)
	snapFailAt  int64        // ns since origin: after a failure, none before it (snapshot.every_firings' too)
	syncQueued  bool         // a syncPass is queued on the loop
	// snapshots counts those completed since start; snapDone is when the
	// last one completed and snapTook how long it took.
	snapshots uint64
	snapDone  time.Time
	snapTook  time.Duration
	// gap: records were refused while the log could not be written (its
	// memory backlog was full): until a snapshot covers them, a crash would
	// lose them.
	gap bool
	// tailFailing: the last Checkpoint failed (logged once until one works).
	tailFailing bool
	// replayed is the firings start-up replayed (recovered.firings).
	replayed uint64
	// marked: the recovery mark is in the data directory (recoverymark.go),
	// and markBefore: it says a snapshot before serving was tried.
	marked, markBefore bool
	// restoreNs is the start-up's recovery time before its replay (the
	// log opened, the snapshot read): about what writing one costs.
	restoreNs int64
}

// openState opens the data directory's log and rebuilds the core from it,
// or makes a fresh core when persistence is off or the log is empty.
func (s *Server) openState(start uint64) (restored bool, err error) {
	cfg := &s.cfg
	newCore := func() error {
		w, err := wheel.New(start, wheel.Config{})
		if err != nil {
			return err
		}
		s.core = session.New(cfg.sessionConfig(), cfg.Limits, w, s.log, s.rlog)
		return nil
	}
	if cfg.clustered() {
		return false, s.openReplica() // replica.go
	}
	if !cfg.persistent() {
		s.log.Info("persistence off: timers, backlogs and tw-time are kept in memory only and lost at exit")
		return false, newCore()
	}
	policy, _ := journal.ParseSyncPolicy(cfg.Fsync) // checked by withDefaults
	dir := filepath.Join(cfg.DataDir, logDir)
	began := time.Now()
	j, rec, err := s.recoverState(dir, policy)
	if err != nil {
		return false, err
	}
	s.persist = &persist{s: s, j: j, policy: policy}
	s.readRecoveryMark() // (a new state's first snapshot removes an old one)
	s.commits = s.persist
	s.reportRepair(j.Repaired())
	if s.core == nil {
		s.log.Info("persistence on: a new state", "dir", dir, "fsync", policy)
		if err := newCore(); err != nil {
			return false, err
		}
		// The first snapshot is the state the log starts from.
		s.startSnapshotAt(waitedSched(s.cfg.Snapshot))
		if err := s.waitSnapshot(); err != nil {
			j.Close()
			return false, fmt.Errorf("persistence: the first snapshot: %w", err)
		}
		return false, nil
	}
	rec.took = time.Since(began)
	s.log.Info("persistence on: state recovered", "dir", dir, "fsync", policy, "timers", s.core.Wheel().Len(),
		"receivers", len(s.core.Receivers()), "snapshot_index", rec.snapshotIndex, "records_replayed", rec.records,
		"firings_replayed", rec.firings, "replay_took", rec.replayTook.Round(time.Millisecond),
		"took", rec.took.Round(time.Millisecond))
	s.persist.replayed = rec.firings
	// The replay's time counts toward the next snapshot (every_replay):
	// after a long one, one starts as the server serves, or before it
	// serves when the last start-up's never committed (recoverymark.go).
	s.persist.replayNs = int64(rec.replayTook)
	s.persist.restoreNs = int64(rec.took - rec.replayTook)
	return true, nil
}

// resumeTick is tw-time after a restart: where the state stopped, moved on
// by the wall-clock time since in catch-up mode (unless frozen). This is
// the one place the server reads wall-clock time for tw-time.
func (s *Server) resumeTick(now time.Time) uint64 {
	c := s.core
	at := c.Now()
	wallNs, wallTick := c.Wall()
	if s.cfg.Downtime != DowntimeCatchUp || c.Frozen() || wallNs == 0 {
		return max(at, wallTick)
	}
	gone := now.UnixNano() - int64(wallNs)
	if gone <= 0 {
		s.log.Warn("the wall clock is behind the last time recorded in the log: no catch-up", "behind", time.Duration(-gone))
		return max(at, wallTick)
	}
	ticks := uint64(float64(gone) * c.Speed() / float64(s.cfg.Tick))
	if ticks > ^uint64(0)-wallTick {
		return ^uint64(0)
	}
	return max(at, wallTick+ticks)
}

// startLog makes the recovered (or new) state the log's: the sessions of
// the process that wrote it are closed, the configured limits and the
// clock's start are recorded, and the record is written at once.
func (s *Server) startLog(restored bool) error {
	p := s.persist
	if p == nil {
		return nil
	}
	s.core.Record(true)
	if restored {
		s.core.Restart()
		s.noteDowntime() // downtime.go
	}
	s.core.SetLimits(s.cfg.Limits)
	s.core.SetAddOnlyBound(s.cfg.AddOnlyBound)
	s.core.SetClock(s.clock.Speed(), s.clock.Frozen())
	s.recordWall()
	rec, _ := s.core.TakeRecord()
	if _, err := p.j.Append(rec); err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	if err := p.j.Sync(); err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	s.checkpoint()
	if p.replayed >= uint64(s.cfg.Snapshot.EveryFirings) {
		// The next crash would replay them all again: a snapshot first
		// (snapshot.every_firings). One that fails is logged, and the
		// server serves anyway: the log still holds the state.
		s.log.Info("persistence: the recovery replayed many firings; a snapshot before serving",
			"firings_replayed", p.replayed, "every_firings", s.cfg.Snapshot.EveryFirings)
		_ = s.snapshotNow()
	} else if s.replayLong() {
		// The replay's time (every_replay): a snapshot as the server
		// serves, or before it in a crash loop (recoverymark.go).
		s.recoverAfterLongReplay()
	}
	return nil
}

// recordWall records the wall-clock time with tw-time (the clock's).
func (s *Server) recordWall() {
	s.core.SetWall(uint64(time.Now().UnixNano()), s.clock.Now())
	now := s.nowNs()
	s.wallAt, s.wallIdleAt = now+int64(wallEvery), now+int64(wallIdleEvery)
}

// commit is the journal's committer.commit: the turn's record is appended
// to the log (and fsynced with fsync always when it answered a change), a
// failing log is retried, and a snapshot is started when one is due.
func (p *persist) commit(rec []byte, replies, second bool) {
	s := p.s
	if p.gap {
		s.commitGap(replies)
		return
	}
	var err error
	if rec != nil {
		var index uint64
		index, err = p.j.Append(rec)
		p.records++
		p.firings += session.RecordFirings(rec)
		p.replayNs += s.turnCost
		if index == 0 && err != nil { // refused: the log misses this turn
			s.log.Error("persistence: a record was refused; a snapshot must cover the state before more is logged",
				"err", err, "bytes", len(rec))
			p.gap = true
			s.commitGap(replies)
			return
		}
	}
	deferred := err == nil && replies && p.policy == journal.SyncAlways && p.failing == nil && s.syncAfterPass()
	if deferred {
		// The replies leave after the pass's fsync (syncPass), which
		// covers every connection read in this poll pass.
		s.core.HoldReplied()
	} else if p.failing != nil && (s.nowNs() >= p.retryAt || rec != nil && err == nil) ||
		err == nil && replies && p.policy == journal.SyncAlways {
		// Sync also retries what a failure left in memory (every
		// retryEvery, or at once when this turn's Append got through, so
		// that nothing is released before its fsync); after a failed fsync
		// only a Sync that succeeds makes the journal healthy again (its
		// Appends report the failure until then).
		err = p.j.Sync()
	}
	if err == nil && p.failing == nil {
		// Every turn (a mutex, no system call): everysec's background
		// fsync failed. Its records are written again from memory, and no
		// change is acknowledged until an fsync succeeds (Sync, above).
		err = p.j.Healthy()
	}
	s.afterSync(err)
	if second {
		s.checkpoint()
	}
	s.pollSnapshot()
	if p.failing == nil && p.snap == nil {
		if s.replayCostly() {
			p.snapRetryAt = 0 // (MinInterval does not hold it back)
		}
		if s.snapshotDue(second) {
			s.startSnapshot()
		}
	}
}

// syncAfterPass queues, once per poll pass, the fsync that group-commits
// the records of every turn in it (fsync always): gnet runs the loop's
// queued tasks after it has served every connection its poll found ready,
// as Redis fsyncs once per pass of its event loop. It reports false when
// the loop cannot take a task (before Start): the caller syncs at once.
func (s *Server) syncAfterPass() bool {
	p := s.persist
	if p.syncQueued {
		return true
	}
	l := s.loop.Load()
	if l == nil {
		return false
	}
	err := (*l).Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		p.syncQueued = false
		s.syncPass()
		return nil
	}))
	p.syncQueued = err == nil
	return p.syncQueued
}

// syncPass fsyncs the log for the replies held in this poll pass, lets
// them go, and writes them out. Runs on the loop.
func (s *Server) syncPass() {
	p := s.persist
	if !p.gap {
		err := p.j.Sync()
		s.afterSync(err)
		if err == nil && p.failing == nil {
			s.core.ReleaseHeld()
		}
	}
	s.flush()
	s.retime()
}

// afterSync takes a log write's or fsync's outcome: a failure holds the
// replies that need it and refuses changes; a success after failures
// accepts them again and lets the held replies go.
func (s *Server) afterSync(err error) {
	p := s.persist
	switch {
	case err != nil:
		s.core.HoldReplied()
		s.logFailing(err)
	case p.failing != nil && !p.gap && p.j.Healthy() == nil: // (with a gap, commitGap decides)
		s.log.Info("persistence: the log is written again; changes are accepted", "held_sessions", s.core.Held())
		p.failing = nil
		s.setReadOnly("")
		s.core.ReleaseHeld()
	}
}

// commitGap runs instead of commit's append while the log misses records:
// ones refused while the disk was full and the journal's memory backlog
// with it, or a turn's record too large for a segment. Records after a
// hole would replay onto the wrong state, so nothing more is appended, the
// replies that need a record wait, and changes are refused, until a
// snapshot covers the whole state. That snapshot is written at once, on
// the loop (it is rare: the loop stops for the whole encoding), as soon as
// the log is healthy; then the held replies leave.
func (s *Server) commitGap(replies bool) {
	p := s.persist
	if replies {
		s.core.HoldReplied()
	}
	if s.nowNs() < p.retryAt {
		return
	}
	err := p.j.Healthy()
	if err != nil {
		err = p.j.Sync() // writes what waits in memory, if the disk takes it
	}
	if err == nil {
		err = s.snapshotNow()
	}
	if err != nil {
		s.logFailing(err)
		return
	}
	s.log.Info("persistence: a snapshot covers the records the log missed; changes are accepted", "held_sessions", s.core.Held())
	p.gap, p.failing = false, nil
	s.setReadOnly("")
	s.core.ReleaseHeld()
}

// logFailing makes the core read-only after a log write failed.
func (s *Server) logFailing(err error) {
	p := s.persist
	if now := s.nowNs(); p.failing == nil || now >= p.retryAt {
		p.retryAt = now + int64(retryEvery) // (not moved on by every failed Append)
	}
	if p.failing == nil {
		s.log.Error("persistence: cannot write the log; changes to timers are refused until it can", "err", err)
	}
	p.failing = err
	why := fmt.Sprintf("the server cannot write its log (%v): changes are refused until it can; retry later", err)
	if errors.Is(err, journal.ErrClosed) {
		why = "the server is stopping"
	}
	s.setReadOnly(why)
}

// setReadOnly makes the core refuse changes (why != "") or accept them,
// and publishes why for /readyz and the metrics (ReadOnly).
func (s *Server) setReadOnly(why string) {
	s.core.SetReadOnly(why)
	s.m.readOnly.Store(why)
}

// ReadOnly returns why the server refuses changes to timers (its log
// cannot be written or fsynced), or "" when it accepts them. Safe from any
// goroutine.
func (s *Server) ReadOnly() string {
	why, _ := s.m.readOnly.Load().(string)
	return why
}

// snapshotDue reports whether enough log has been written since the last
// snapshot for another: records and their firings are counted every turn,
// the log's bytes looked at once a second (second).
func (s *Server) snapshotDue(second bool) bool {
	p := s.persist
	return p.records >= s.cfg.Snapshot.EveryRecords || s.replayCostly() || s.replayLong() ||
		second && p.j.Stats().LogSinceSnapshot >= s.cfg.Snapshot.EveryBytes
}

// replayCostly reports whether the records since the last snapshot began
// fired snapshot.every_firings timers, and no failed snapshot asks to
// wait: a restart would fire them all again, so a snapshot is due at once.
func (s *Server) replayCostly() bool {
	p := s.persist
	return p.firings >= uint64(s.cfg.Snapshot.EveryFirings) && s.nowNs() >= p.snapFailAt
}

// replayLong reports whether the records since the last snapshot began
// took the loop snapshot.every_replay to make: a snapshot is due, within
// min_interval's spacing. (Not at once as for every_firings: a loop kept
// busy by steady load would write snapshots back to back, and each holds
// the backlogs' frames the loop has dropped meanwhile: a server whose
// never-reading sessions filled 256 MiB of budgets peaked at 2.58x them.)
func (s *Server) replayLong() bool {
	p, every := s.persist, s.cfg.Snapshot.EveryReplay
	return every > 0 && p.replayNs >= int64(every) && s.nowNs() >= p.snapFailAt
}

// drain is the journal's committer.drain: the replies held for the poll
// pass's fsync (fsync always) go.
func (p *persist) drain() {
	if p.syncQueued {
		p.s.syncPass()
	}
}

// stop is the journal's committer.stop, after the event loop has stopped:
// the last record, a last snapshot (so the next start replays nothing),
// and the log closed.
func (p *persist) stop() error {
	s := p.s
	_ = s.waitSnapshot()
	rec, _ := s.core.TakeRecord()
	if rec != nil && !p.gap { // after a hole only a snapshot may follow
		if _, err := p.j.Append(rec); err != nil {
			s.log.Error("persistence: the last record could not be written", "err", err)
		}
	}
	var err error
	if p.j.Healthy() == nil {
		err = s.snapshotNow()
	}
	s.checkpoint()
	if cerr := p.j.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// close is the journal's committer.close: the log of a server that failed
// to start is closed.
func (p *persist) close() { _ = p.j.Close() }
