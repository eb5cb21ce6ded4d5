package server

import (
	"math"
	"time"
)

// The ticker's sleeps. A Go timer on an idle process wakes through
// epoll_wait, whose timeout is in whole milliseconds: the runtime rounds the
// last sub-millisecond down and then waits one more millisecond, so a timer
// fires up to 1 ms late (on Linux). The ticker therefore sleeps on a Go timer
// only until finalApproach before its wake instant, and covers the rest with
// preciseSleep (nanosleep(2) on Linux, which the kernel times in
// microseconds), in slices of at most nanoSlice so that an earlier wake
// published meanwhile is noticed.
const (
	maxSleep      = time.Second // tw-time keeps moving in an idle wheel
	finalApproach = 1500 * time.Microsecond
	nanoSlice     = 500 * time.Microsecond
	tickSlack     = 50 * time.Microsecond // wake just after a tick boundary, not just before
)

// runTicker rings the doorbell when the wheel's next event is due in real
// time. Waking only for events, not on every tick, keeps an idle server
// idle. wakeAt is published by retime on the loop; rearm wakes the ticker
// when wakeAt moved earlier or a chain of advance turns has finished.
func (s *Server) runTicker() {
	timer := time.NewTimer(maxSleep)
	defer timer.Stop()
	wait := func(d time.Duration) bool {
		timer.Reset(d)
		select {
		case <-s.done:
			return false
		case <-s.rearm:
		case <-timer.C:
		}
		return true
	}
	for {
		d := time.Duration(s.wakeAt.Load() - int64(time.Since(s.origin)))
		switch {
		case d <= 0:
			s.ring()
			// The chain of advance turns signals rearm when it is done.
			if !wait(maxSleep) {
				return
			}
		case d > finalApproach:
			if !wait(min(d-finalApproach, maxSleep)) {
				return
			}
		default:
			preciseSleep(min(d, nanoSlice))
			select {
			case <-s.done:
				return
			default:
			}
		}
	}
}

// retime tells the ticker when to wake: at the real time the clock reaches
// the tick of the wheel's next event (never while frozen: fast-forwards
// advance at once), or when the connections' timeouts are next checked,
// whichever comes first. It runs on the loop after every advance and request.
func (s *Server) retime() {
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
	if p := s.persist; p != nil {
		wake = min(wake, p.wallAt) // tw-time's pairing with the wall clock
		if p.failing != nil {
			wake = min(wake, p.retryAt) // try the log again
		}
		if p.snap != nil {
			wake = min(wake, int64(time.Since(s.origin))+int64(snapshotPoll))
		}
	}
	if old := s.wakeAt.Swap(wake); wake < old {
		s.signalRearm()
	}
}

func (s *Server) signalRearm() {
	select {
	case s.rearm <- struct{}{}:
	default:
	}
}
