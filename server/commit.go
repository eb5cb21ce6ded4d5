package server

// The commit seam (STYLE 16). At the end of every event-loop turn the
// loop hands the turn's record (session.Core.TakeRecord: the Core's inputs
// of the turn) to its committer, which makes it durable: the single-node
// journal (persist.go: appended to the write-ahead log, fsynced as the
// fsync policy says) or, in a cluster, the replicated log (cluster.go:
// proposed to raft and committed by a quorum). The loop does not know
// which it has.
//
// The contract on the replies: a reply to a request that changed state
// (TakeRecord's replies) must not leave before its record is durable. The
// committer never blocks the loop for that: it holds the turn's replied
// sessions (session.Core.HoldReplied) and, once the record is durable,
// lets them go (session.Core.ReleaseHeld) on the loop and flushes. Events
// are not held by it: they may leave before their record is durable.
//
// Snapshot and restore belong to each implementation, with the same bytes
// (session.Snapshot, encoded piecewise by writeSnapshot's encoder on its
// own goroutine, the loop paused only for the copy): the journal snapshots
// when enough log was written since the last and restores at start
// (openState); raft asks for snapshots and restores them through its
// consumer.

// committer is where the loop commits each turn's record. Every method is
// called on the event loop (stop and close after it has stopped). A
// server without persistence has none (Server.commits is nil) and commits
// nothing.
type committer interface {
	// commit takes the record of the turn that just ended (nil when the
	// turn recorded nothing) and whether it answered a request that changed
	// state, before the turn's output is flushed. second says a second has
	// passed since the wall-clock time was last recorded (once-a-second
	// upkeep). It holds the replies that must wait and releases them once
	// the record is durable, without blocking.
	commit(rec []byte, replies, second bool)
	// drain lets go, at a graceful stop, the held replies whose records are
	// or can now be made durable, before the connections close.
	drain()
	// stop ends committing at a graceful stop, after the loop has stopped:
	// the last record, and whatever makes the next start quick.
	stop() error
	// close releases the committer of a server that failed to start.
	close()
}

// commit ends a turn's durability work: the wall-clock time is recorded
// with tw-time once a second (so that a restart, or a new leader, knows how
// long the service was down), then the turn's record goes to the
// committer. It runs on the loop before every flush.
func (s *Server) commit() {
	c := s.commits
	if c == nil {
		return
	}
	now := s.nowNs()
	second := now >= s.wallAt
	if second {
		if !s.idlePairing() || s.core.Recording() || now >= s.wallIdleAt {
			s.recordWall()
		} else {
			s.wallAt = now + int64(wallEvery) // (the pairing waits: see wallIdleEvery)
		}
	}
	rec, replies := s.core.TakeRecord()
	if rec != nil {
		s.recordAt = now
		s.turnCost = max(now-s.turnAt, 0)
		s.turnAt = now // (a turn may commit several records: readDeferred)
	}
	c.commit(rec, replies, second)
}

// quiet reports whether the single node's log has had no record for
// idleAfter: the loop then has no once-a-second upkeep (wallIdleEvery).
func (s *Server) quiet(now int64) bool {
	return s.idlePairing() && now-s.recordAt >= int64(idleAfter)
}

// idlePairing reports whether an idle node records the wall-clock pairing
// only every wallIdleEvery: a single node with downtime catch-up, which
// computes the same downtime from an older pairing. With downtime pause
// the last pairing is where tw-time resumes after a crash: recorded once a
// minute, up to a minute that the server was up would count as downtime
// (its timers firing up to a minute late), so it stays once a second
// (TestIdlePausedServerResumesWhereItWas).
func (s *Server) idlePairing() bool {
	return s.persist != nil && s.cfg.Downtime != DowntimePause
}

// stopLog ends committing at a graceful stop, after the event loop has
// stopped.
func (s *Server) stopLog() error {
	if s.commits == nil {
		return nil
	}
	return s.commits.stop()
}

// closeLog closes the committer of a server that failed to start.
func (s *Server) closeLog() {
	if s.commits != nil {
		s.commits.close()
	}
}
