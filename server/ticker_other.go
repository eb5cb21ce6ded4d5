//go:build !linux

package server

import (
	"sync/atomic"
	"time"
)

// The ticker's sleeps where there is no timerfd. A Go timer on an idle
// process may wake late by up to the poller's timeout granularity, so the
// ticker sleeps on a Go timer only until finalApproach before its wake
// instant and covers the rest in slices of at most nanoSlice, so that an
// earlier wake published meanwhile is noticed.
const (
	maxSleep      = time.Second // the ticker looks at wakeAt at least this often
	finalApproach = 1500 * time.Microsecond
	nanoSlice     = 500 * time.Microsecond
)

// tickerState is the ticker's: wakeAt is the instant to wake at, in ns
// since origin, set on the loop; rearm tells the ticker it moved earlier,
// or that a chain of advance turns has finished.
type tickerState struct {
	wakeAt atomic.Int64
	rearm  chan struct{}
}

// startTicker starts the ticker goroutine, which rings the doorbell when
// the wheel's next event is due in real time; it ends with the server.
func (s *Server) startTicker() error {
	s.tk.rearm = make(chan struct{}, 1)
	s.tk.wakeAt.Store(int64(time.Since(s.origin)))
	go s.runTicker()
	return nil
}

// setWake publishes the instant the ticker should wake at. On the loop.
func (s *Server) setWake(wake int64) {
	if old := s.tk.wakeAt.Swap(wake); wake < old {
		s.signalRearm()
	}
}

// chainDone retimes after a chain of advance turns and tells the ticker
// it has finished, so it may sleep until the next wake. On the loop.
func (s *Server) chainDone() {
	s.retime()
	s.signalRearm()
}

func (s *Server) signalRearm() {
	select {
	case s.tk.rearm <- struct{}{}:
	default:
	}
}

func (s *Server) runTicker() {
	timer := time.NewTimer(maxSleep)
	defer timer.Stop()
	wait := func(d time.Duration) bool {
		timer.Reset(d)
		select {
		case <-s.done:
			return false
		case <-s.tk.rearm:
		case <-timer.C:
		}
		return true
	}
	for {
		d := time.Duration(s.tk.wakeAt.Load() - int64(time.Since(s.origin)))
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
			time.Sleep(min(d, nanoSlice))
			select {
			case <-s.done:
				return
			default:
			}
		}
	}
}
