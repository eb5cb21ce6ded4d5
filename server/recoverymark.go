package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// The recovery mark bounds the replay of a crash loop (one node; a
// cluster's replicas recover through raft).
//
// A start-up whose replay took snapshot.every_replay or more starts a
// snapshot as it serves: it stays as quick as the replay allowed. But a
// crash before that snapshot is committed replays the same records again,
// plus what the start-up did since (its catch-up of the downtime
// included), so in a crash loop faster than a snapshot each restart
// replayed more than the one before: at 100M timers, 1.8M, 3.0M, 4.0M,
// 4.9M and 5.8M firings in restarts two seconds apart (docs/BENCHMARKS.md,
// "A crash loop's replay is bounded"), bounded only by every_firings.
//
// So such a start-up first writes the mark, <data_dir>/recovery.pending
// (fsynced with its directory), saying its snapshot runs as it serves;
// the commit of any snapshot removes it. A start-up whose replay took
// every_replay, that finds that mark, and whose replay took at least as
// long as its restore before it (the snapshot read, about what writing one
// costs) writes its snapshot before it serves, having rewritten the mark
// to say so: that restart is longer by one snapshot, and the next replays
// only what came after it. This is the rent-or-buy rule: replays are paid
// again at each restart until one costs as much as the snapshot, and then
// the snapshot is bought, so a crash loop's replay stays under about one
// restore's time plus one start-up's work, whatever the loop's length. A
// start-up whose replay was shorter serves first: paying the snapshot
// would cost more than replaying once more. One that finds the mark
// saying a snapshot before serving was tried (the snapshot itself may be
// what kills the process: the memory of its copy, the disk) serves first
// too: the server then serves at every other start-up, at worst.
const recoveryMarkName = "recovery.pending"

// The mark's first word: what the start-up that wrote it did.
const (
	markAsServing = "as-serving"     // started its snapshot as it served
	markBefore    = "before-serving" // wrote its snapshot before serving
)

// recoveryMarkPath is the mark's file in the data directory.
func (s *Server) recoveryMarkPath() string {
	return filepath.Join(s.cfg.DataDir, recoveryMarkName)
}

// readRecoveryMark notes whether the mark is in the data directory, and
// whether it says a snapshot before serving was tried. Anything there
// but a file that reads "before-serving" counts as "as-serving" (an
// unreadable one, a dangling link): the worst that costs is one snapshot
// before serving.
func (s *Server) readRecoveryMark() {
	p, path := s.persist, s.recoveryMarkPath()
	_, err := os.Lstat(path)
	p.marked = err == nil || !os.IsNotExist(err)
	b, _ := os.ReadFile(path)
	p.markBefore = p.marked && bytes.HasPrefix(b, []byte(markBefore))
}

// recoverAfterLongReplay decides, after a replay of every_replay or more,
// whether the start-up writes its snapshot before serving or as it serves
// (see recoveryMarkName), writes the mark saying which, and does it.
func (s *Server) recoverAfterLongReplay() {
	p := s.persist
	took := time.Duration(p.replayNs).Round(time.Millisecond)
	restore := time.Duration(p.restoreNs).Round(time.Millisecond)
	switch {
	case p.markBefore:
		s.log.Warn("persistence: the last start-up's snapshot before serving was never written either; this one serves first",
			"mark", s.recoveryMarkPath())
	case p.marked && p.replayNs >= p.restoreNs:
		s.log.Warn("persistence: the recovery's replay took long and the last start-up's snapshot was never written; a snapshot before serving",
			"replay_took", took, "restore_took", restore, "every_replay", s.cfg.Snapshot.EveryReplay, "mark", s.recoveryMarkPath())
		_ = s.writeRecoveryMark(markBefore)
		_ = s.snapshotNow()
		return
	case p.marked:
		s.log.Info("persistence: the last start-up's snapshot was never written, but replaying again costs less than writing one; this one serves first",
			"replay_took", took, "restore_took", restore, "mark", s.recoveryMarkPath())
	}
	written := s.writeRecoveryMark(markAsServing)
	s.log.Info("persistence: the recovery's replay took long; a snapshot starts as the server serves",
		"replay_took", took, "every_replay", s.cfg.Snapshot.EveryReplay, "mark_written", written)
	_ = s.startSnapshot()
}

// writeRecoveryMark replaces the mark with one whose first word is kind,
// durably. A failure is logged: the start-up goes on, and a crash loop
// then replays as before. The mark counts as present either way (its
// removal ignores an absent file). It reports whether it was written.
func (s *Server) writeRecoveryMark(kind string) bool {
	path := s.recoveryMarkPath()
	body := fmt.Sprintf("%s\nwritten %s by a start-up that replayed %d firings in %s; removed by the next snapshot's commit\n",
		kind, time.Now().UTC().Format(time.RFC3339), s.persist.replayed, time.Duration(s.persist.replayNs).Round(time.Millisecond))
	s.persist.marked = true
	if err := replaceFile(path, body, true); err != nil {
		s.log.Warn("persistence: the recovery mark could not be written; a crash before the snapshot is done replays this start's records again",
			"file", path, "err", err)
		return false
	}
	return true
}

// clearRecoveryMark removes the mark once a snapshot is committed (not
// fsynced: a mark that comes back after a power cut costs one snapshot
// before serving, if that start-up's replay is long).
func (s *Server) clearRecoveryMark() {
	if err := os.Remove(s.recoveryMarkPath()); err != nil && !os.IsNotExist(err) {
		s.log.Warn("persistence: the recovery mark could not be removed", "file", s.recoveryMarkPath(), "err", err)
		return
	}
	s.persist.marked, s.persist.markBefore = false, false
}

// replaceFile writes content to a temporary file beside path (mode 0600)
// and renames it over path, so a reader sees the old file or the new one
// whole; with durable, the file and its directory are fsynced too.
func replaceFile(path, content string, durable bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if durable {
		return vfs.OS{}.SyncDir(filepath.Dir(path))
	}
	return nil
}
