package server

import (
	"math"
	"time"
)

// tickSlack places a wake just after a tick boundary, not just before it.
const tickSlack = 50 * time.Microsecond

// retime tells the ticker when to wake: at the real time the clock reaches
// the tick of the wheel's next event (never while frozen: fast-forwards
// advance at once), or when the connections' timeouts are next checked,
// whichever comes first. It runs on the loop after every advance and request.
func (s *Server) retime() {
	if s.replica != nil && !s.replica.leading {
		s.setWake(math.MaxInt64) // only the leader fires
		return
	}
	c := s.clock
	wake := int64(math.MaxInt64)
	if !c.Frozen() {
		if next, ok := s.core.Wheel().NextEvent(); ok {
			if d, ok := c.Until(next); ok {
				wake = int64(time.Since(s.origin) + d + tickSlack)
			}
		}
	}
	if len(s.links) > 0 && s.sweepEvery > 0 {
		wake = min(wake, s.sweepAt) // the timeouts' sweep
	}
	if s.core.Stalled() > 0 { // top up the stalled sessions as they drain
		wake = min(wake, int64(time.Since(s.origin))+s.pumpWait)
	}
	if s.commits != nil {
		if s.quiet(s.nowNs()) {
			wake = min(wake, s.wallIdleAt) // tw-time's pairing with the wall clock (commit.go)
		} else {
			wake = min(wake, s.wallAt) // the pairing, and the log's once-a-second upkeep
		}
	}
	if p := s.persist; p != nil {
		if p.failing != nil {
			wake = min(wake, p.retryAt) // try the log again
		}
		if p.snap != nil {
			wake = min(wake, int64(time.Since(s.origin))+int64(snapshotPoll))
		}
	}
	s.setWake(wake)
}
