package server

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tickwheel/tickwheel/session"
)

// The doorbell. Advance turns run on the event loop between rounds of I/O:
// the ticker, and a turn that leaves work (a burst bounded by
// max_fires_per_turn), ring the doorbell, an internal TCP connection whose
// far end gnet polls like a client's, and the loop runs one turn when it
// becomes readable, in the same round as the other connections' traffic.
//
// gnet's EventLoop.Execute (and Conn.Wake) would not do: its loop runs every
// queued task, those the tasks queue themselves included, before it polls
// again, so a chain of turns posted that way stalls every connection until a
// burst is over.

// bellMarker is the context of gnet's end of the doorbell.
type bellMarker struct{}

var bellByte = []byte{0}

// openBell creates the doorbell: a TCP pair on a private loopback listener,
// one end enrolled in gnet (whose OnOpen teaches the server its event loop),
// the other kept to ring it and closed when the server stops. It returns
// once the loop has taken its end.
func (s *Server) openBell(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("server: doorbell: %w", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("server: doorbell: %w", err)
	}
	ours := <-accepted
	if ours == nil {
		dialed.Close()
		return fmt.Errorf("server: doorbell: accept failed")
	}
	go func() {
		<-s.done
		ours.Close()
	}()
	res, err := s.gnetRegister(gnet.NewNetConnContext(gnet.NewContext(context.Background(), bellMarker{}), dialed))
	if err != nil {
		return fmt.Errorf("server: doorbell: %w", err)
	}
	select {
	case r := <-res:
		if r.Err != nil {
			return fmt.Errorf("server: doorbell: %w", r.Err)
		}
	case <-s.done:
		return fmt.Errorf("server: stopped while starting")
	case <-ctx.Done():
		return fmt.Errorf("server: doorbell: %w", ctx.Err())
	}
	if s.loop.Load() == nil { // OnOpen runs before Register answers
		return fmt.Errorf("server: doorbell: the event loop did not open it")
	}
	s.bell.Store(&ours)
	return nil
}

// ring asks the loop for an advance turn unless one is asked for already.
// Safe from any goroutine. At most one byte is ever unread, so the write
// never blocks.
func (s *Server) ring() {
	if s.rung.Swap(true) {
		return
	}
	if b := s.bell.Load(); b != nil {
		_, err := (*b).Write(bellByte)
		if err == nil {
			return
		}
		if !s.stopping.Load() {
			s.log.Error("doorbell: the wheel cannot be advanced", "err", err)
		}
	}
	s.rung.Store(false)
}

// onBell runs on the loop when the doorbell rang: one advance turn, at most
// max_fires_per_turn firings, the timeouts' sweep when it is due, and the
// requests deferred by readBudget, written out at once. A turn that leaves work
// rings again, to go on after the next round of I/O; the last one tells the
// ticker when to wake next.
func (s *Server) onBell(c gnet.Conn) {
	_, _ = c.Discard(-1)
	s.rung.Store(false)
	if s.replica != nil && !s.replica.leading {
		return // only the leader fires
	}
	s.count(&s.turns)
	s.beginTurnNow()
	more := s.advance()
	now := s.nowNs()
	if now >= s.sweepAt && s.sweepEvery > 0 {
		s.sweep(now)
	}
	s.reportFastForward(more)
	s.readDeferred()
	more = s.core.More() || s.more || more // a fast-forward read just now
	s.more = false
	s.endTurn()
	if more {
		s.ring()
		return
	}
	s.chainDone()
}

// ffRun is a stretch of turns that each left work, the wheel behind the
// clock's target (a fast-forward, or a catch-up), as reportFastForward
// follows it: the wheel's tick and the firings when it was first seen
// leaving work, and its progress log.
type ffRun struct {
	from, fired uint64
	prog        *progress
}

// reportFastForward logs, at most every progressEvery while firings go on
// over many turns, how far the wheel has come: ticks done of the ticks to
// go (counted from the first turn that left work), the rate, the ETA, and
// the firings so far. An admin's fast-forward of a billion ticks over busy
// timers can take minutes (other sessions are served meanwhile), as can
// the catch-up after a long downtime or a burst of expiries larger than
// the loop can fire at the clock's pace; stats' lag shows the rest.
func (s *Server) reportFastForward(more bool) {
	if !more {
		s.ff = nil
		return
	}
	w, target := s.core.Wheel(), s.core.Now()
	if s.ff == nil {
		msg := "tw-time catching up" // no fast-forward waits: the wheel is behind the clock
		if s.core.Waiters() > 0 {
			msg = "fast-forward in progress"
		}
		s.ff = &ffRun{from: w.Now(), fired: s.core.FiredTotal(),
			prog: newProgress(s.log, msg, "ticks", target-w.Now(), progressEvery,
				func() time.Duration { return time.Duration(s.nowNs()) })}
		return
	}
	s.ff.prog.total = max(s.ff.prog.total, target-s.ff.from) // tw-time may move on meanwhile
	s.ff.prog.update(w.Now()-s.ff.from, "now", w.Now(), "target", target, "fired", s.core.FiredTotal()-s.ff.fired)
}

// advance moves the wheel toward the clock's tw-time, at most
// max_fires_per_turn firings. It reports whether work is left for another
// turn.
func (s *Server) advance() bool {
	return s.core.Advance(s.clock.Now(), s.cfg.MaxFiresPerTurn)
}

// applyClock applies an admin's clock op to tw-time's clock, for the core
// (see session.Core.SetClockHook), and returns the clock's tick after it.
func (s *Server) applyClock(op session.ClockOp, speed float64, ticks uint64) uint64 {
	switch op {
	case session.ClockFreeze:
		s.clock.Freeze()
	case session.ClockResume:
		s.clock.Resume()
	case session.ClockSetSpeed:
		_ = s.clock.SetSpeed(speed) // the core checked the range
	case session.ClockFastForward:
		_ = s.clock.FastForward(ticks) // the core checked for overflow
	case session.ClockStopAt: // a freeze stopped a fast-forward part-way
		s.log.Info("fast-forward stopped by freeze", "at", ticks, "target_was", s.clock.Now())
		s.clock.FreezeAt(ticks)
	}
	if op != session.ClockFastForward {
		s.retime()
	}
	if s.commits != nil {
		s.recordWall() // the downtime after a restart counts from the new tw-time
	}
	return s.clock.Now()
}
