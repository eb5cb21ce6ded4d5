package server

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// The recovery mark bounds the replay of a crash loop.
//
// A start-up whose replay took snapshot.every_replay or more starts a
// snapshot as it serves: it stays as quick as the replay allowed. But a
// crash before that snapshot is committed replays the same records again,
// plus what the start-up did since (its catch-up of the downtime
// included), so in a crash loop faster than a snapshot each restart
// replayed more than the one before: at 100M timers, 1.5M, 2.7M and then
// 3.9M firings in three restarts two seconds apart (docs/BENCHMARKS.md,
// "A crash loop's replay is bounded"), until every_firings was reached.
//
// So such a start-up first writes the mark, <data_dir>/recovery.pending
// (fsynced with its directory), and the commit of any snapshot removes it.
// A start-up whose replay took every_replay and that finds the mark (the
// last one's snapshot never committed) writes its snapshot before it
// serves: that restart is longer by one snapshot, and the next replays
// only what came after it.
const recoveryMarkName = "recovery.pending"

// recoveryMarkPath is the mark's file in the data directory.
func (s *Server) recoveryMarkPath() string {
	return filepath.Join(s.cfg.DataDir, recoveryMarkName)
}

// readRecoveryMark notes whether the mark is in the data directory. An
// error other than its absence counts as present: the worst it costs is a
// snapshot before serving.
func (s *Server) readRecoveryMark() {
	_, err := os.Stat(s.recoveryMarkPath())
	s.persist.marked = err == nil || !os.IsNotExist(err)
}

// writeRecoveryMark writes the mark durably. A failure is logged: the
// start-up goes on, and a crash loop then replays as before.
func (s *Server) writeRecoveryMark() {
	path := s.recoveryMarkPath()
	p := s.persist
	body := fmt.Sprintf("written %s: a start-up replayed %d firings in %s and started a snapshot as it served;\n"+
		"a start-up that finds this file after a long replay writes its snapshot before serving.\n",
		time.Now().UTC().Format(time.RFC3339), p.replayed, time.Duration(p.replayNs).Round(time.Millisecond))
	err := createExclusive(path, body) // (absent: the start-up found none)
	if err == nil {
		err = vfs.OS{}.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		s.log.Warn("persistence: the recovery mark could not be written; a crash before the snapshot is done replays this start's records again",
			"file", path, "err", err)
		return
	}
	p.marked = true
}

// clearRecoveryMark removes the mark once a snapshot is committed (not
// fsynced: a mark that comes back after a power cut costs one snapshot
// before serving, if that start-up's replay is long).
func (s *Server) clearRecoveryMark() {
	if err := os.Remove(s.recoveryMarkPath()); err != nil && !os.IsNotExist(err) {
		s.log.Warn("persistence: the recovery mark could not be removed", "file", s.recoveryMarkPath(), "err", err)
		return
	}
	s.persist.marked = false
}
