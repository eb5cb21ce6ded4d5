package server

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/tickwheel/tickwheel/server/journal"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"
)

// recovered is what start-up found on disk.
type recovered struct {
	snapshotIndex uint64
	records       int
	firings       uint64 // what replaying the records fired again
	timers        int
	took          time.Duration
	replayTook    time.Duration // of took, the replay of the records
}

// recoverState opens the log in dir and rebuilds s.core from it
// (recoverCore). A snapshot whose payload fails its CRC as it is restored
// (journal.Open checks only the file's ends: reading a 1.8 GB snapshot once
// to check it and once to restore it took 0.4 s of a 100M restart) is set
// aside and the journal opened again, which falls back to the previous
// snapshot and the log after it, until one restores or none is left. On
// an error the journal is closed.
func (s *Server) recoverState(dir string, policy journal.SyncPolicy) (*journal.Journal, recovered, error) {
	cfg := &s.cfg
	for {
		mapped := wheel.MappedBytes()
		j, err := journal.Open(journal.Options{Dir: dir, Sync: policy, Repair: cfg.Repair, Log: s.log,
			Preallocate: logPreallocate, FS: cfg.logFS})
		if err != nil {
			return nil, recovered{}, fmt.Errorf("persistence: %w", repairAdvice(err))
		}
		rec, err := s.recoverCore(j)
		var bad badSnapshot
		if !errors.As(err, &bad) {
			if err != nil {
				j.Close()
				return nil, rec, fmt.Errorf("persistence: recovering from %s: %w", dir, err)
			}
			return j, rec, nil
		}
		s.core = nil
		if err := j.RejectSnapshot(bad.err); err != nil {
			return nil, rec, fmt.Errorf("persistence: recovering from %s: %w", dir, err)
		}
		releaseRestore(mapped)
	}
}

// releaseRestore gives back a failed restore's memory before the next one
// takes as much again (at 100M timers, ~6 GB): its wheel's mappings,
// which cleanups unmap on a goroutine of their own after a collection
// (it waits until no more than before are mapped, for up to
// releaseWait), and its heap.
func releaseRestore(mappedBefore int64) {
	runtime.GC()
	for end := time.Now().Add(releaseWait); wheel.MappedBytes() > mappedBefore && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	debug.FreeOSMemory()
}

// releaseWait bounds releaseRestore's wait for the cleanups.
const releaseWait = 5 * time.Second

// badSnapshot is recoverCore's error for a snapshot file whose payload
// failed its CRC (err wraps journal.ErrCorrupt).
type badSnapshot struct{ err error }

func (b badSnapshot) Error() string { return b.err.Error() }
func (b badSnapshot) Unwrap() error { return b.err }

// recoverCore loads the newest snapshot into s.core (left nil when there is
// none and the log is empty) and replays the log after it. Both steps log
// their progress at most every progressEvery (see progress).
func (s *Server) recoverCore(j *journal.Journal) (recovered, error) {
	var rec recovered
	began := time.Now()
	clock := func() time.Duration { return time.Since(began) }
	if data, index, ok := j.Snapshot(); ok {
		// Read and decoded as one stream: the reads follow the decoding.
		read := &progressReader{r: data, prog: newProgress(s.log, "recovery: reading the snapshot", "bytes",
			uint64(max(j.Stats().SnapshotBytes, 0)), progressEvery, clock)}
		core, err := s.restoreSnapshot(data, read, restoreTimers(j))
		data.Close()
		var bad badSnapshot
		if errors.As(err, &bad) {
			return rec, badSnapshot{fmt.Errorf("snapshot at index %d: %w", index, bad.err)}
		}
		if err != nil {
			return rec, fmt.Errorf("snapshot at index %d: %w", index, err)
		}
		s.core, rec.snapshotIndex = core, index
		s.recoveredSnapshot = int64(read.n)
	}
	if s.core == nil && j.LastIndex() > 0 {
		return rec, fmt.Errorf("the log holds records up to index %d but no snapshot: the state they start from is gone", j.LastIndex())
	}
	cost, err := s.replayCost(j, rec.snapshotIndex, clock)
	if err != nil {
		return rec, err
	}
	meter := newReplayMeter(s.log, cost, progressEvery, clock)
	replayAt := time.Now()
	err = j.Replay(func(index uint64, r []byte) error {
		firings := session.RecordFirings(r)
		if err := s.core.Replay(r); err != nil {
			return fmt.Errorf("record %d: %w", index, err)
		}
		rec.records++
		rec.firings += firings
		meter.replayed(firings)
		s.populateIndexAhead()
		return nil
	})
	rec.replayTook = time.Since(replayAt)
	return rec, err
}

// replayCost reads the log after the snapshot once without replaying it,
// for what replaying it will cost (replayMeter's units: a record, and a
// firing it redoes, count one each), so that the progress line's ETA
// follows the firings to redo, not the records or bytes: a week's
// fast-forward is a few thousand records of millions of firings each.
// Reading costs little beside replaying (Open has read it already: it is
// in the page cache).
func (s *Server) replayCost(j *journal.Journal, snapshotIndex uint64, clock func() time.Duration) (uint64, error) {
	prog := newProgress(s.log, "recovery: measuring the log", "records", j.LastIndex()-snapshotIndex, progressEvery, clock)
	var records, cost uint64
	err := j.Replay(func(_ uint64, r []byte) error {
		records++
		cost += 1 + session.RecordFirings(r)
		prog.update(records)
		return nil
	})
	return cost, err
}

// restoreSnapshot restores a core from the snapshot data. The journal
// checks data's CRC as it streams (Journal.Snapshot): only a restore read
// to data's io.EOF is trusted. When the restore fails, or panics on what
// it decoded, the rest of data is read to tell a damaged file (a
// badSnapshot, for recoverState's fallback) from a snapshot the restore
// refuses whose bytes are as written (an error: a bug, or a format this
// build does not read).
func (s *Server) restoreSnapshot(data io.Reader, read *progressReader, timers uint64) (core *session.Core, err error) {
	defer func() {
		if p := recover(); p != nil {
			core, err = nil, fmt.Errorf("the restore panicked: %v\n%s", p, debug.Stack())
		}
		if err != nil {
			if _, cerr := io.Copy(io.Discard, data); errors.Is(cerr, journal.ErrCorrupt) {
				if !errors.Is(err, journal.ErrCorrupt) { // the restore stopped before the end
					cerr = fmt.Errorf("%w (the restore had stopped: %v)", cerr, err)
				}
				err = badSnapshot{cerr}
			}
		}
	}()
	cfg := s.cfg.sessionConfig()
	cfg.RestoreTimers = timers
	return session.RestoreFrom(cfg, read, s.log, s.rlog)
}

// restoreTimers is the trusted bound of the timers a restore will find
// (session.Config.RestoreTimers): the timers the server had at the log's
// last checkpoint (TAIL, once a second, with a CRC of its own), or 0
// without one. A snapshot holds the timers of its own time, before it;
// more than that bound, the rest of its memory is backed at the
// decoding's pace.
func restoreTimers(j *journal.Journal) uint64 {
	if t, ok := j.Checkpointed(); ok {
		return t.Note
	}
	return 0
}

// progressReader passes a reader's bytes through, reporting how many have
// been read to prog.
type progressReader struct {
	r    io.Reader
	n    uint64
	prog *progress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += uint64(n)
	p.prog.update(p.n)
	return n, err
}
