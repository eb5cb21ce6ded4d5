package session

import (
	"errors"
	"math"

	"github.com/tickwheel/tickwheel/protocol"
)

// ClockOp is a change of tw-time's clock asked for by an admin.
type ClockOp uint8

// The clock ops. Ticks and speed are the op's argument.
const (
	ClockFreeze      ClockOp = iota + 1 // stop following real time
	ClockResume                         // follow real time again
	ClockSetSpeed                       // arg: the new speed
	ClockFastForward                    // ticks: how far tw-time jumps
	// ClockStopAt is passed to the clock hook only, never recorded: a
	// freeze that stopped a fast-forward part-way sets the clock, frozen,
	// back to tick ticks, where the wheel is (see stopFastForward).
	ClockStopAt
)

// FastForwardHeadroom is how far below 2^64 tw-time must stay after a
// fast-forward: one toward 2^64 would run for ever over repeating timers
// and leave no room to add timers after it.
const FastForwardHeadroom = 1 << 62

// MaxFastForwardTick is the highest tw-time a fast-forward may reach.
const MaxFastForwardTick = math.MaxUint64 - FastForwardHeadroom

// ErrFastForwardOverflow is returned by FastForward when tw-time would pass
// MaxFastForwardTick.
var ErrFastForwardOverflow = errors.New("session: fast-forward would take tw-time past 2^64-2^62")

// SetClockHook sets the function that applies a clock op to the server's
// tw-time clock (which the Core does not read) and returns the clock's
// tick after it; the Core records that tick, so a replay needs no clock.
// Without a hook (a replay, a test) tw-time stays where it is, and a
// fast-forward moves it by exactly its ticks.
func (c *Core) SetClockHook(fn func(op ClockOp, speed float64, ticks uint64) uint64) {
	c.clockHook = fn
}

// Now is tw-time for requests: the tick "after" counts from, before which
// "at" is in the past, and that replies report. It is the target, not the
// wheel's position: while the wheel catches up after a burst, a timer
// added "after 1" must not fire with the ticks already gone by.
func (c *Core) Now() uint64 { return max(c.target, c.wheel.Now()) }

// behind returns the tick the wheel has fired everything before: its Now,
// or the tick the oldest timer still due was due at when a backlog drains
// while the wheel follows the clock (see wheel.Advance). Stats' lag counts
// from it.
func (c *Core) behind() uint64 {
	if t, ok := c.wheel.OldestDue(); ok {
		return t
	}
	return c.wheel.Now()
}

// Speed and Frozen return the clock settings admins have made: the server
// sets its clock from them after recovery.
func (c *Core) Speed() float64 { return c.speed }

// Frozen reports whether an admin froze tw-time.
func (c *Core) Frozen() bool { return c.frozen }

// SetClock sets the clock settings the Core reports (in stats, and to the
// server after recovery), without a clock op: the server's configured
// start. Recorded.
func (c *Core) SetClock(speed float64, frozen bool) {
	c.rec.setClock(speed, frozen)
	c.speed, c.frozen = speed, frozen
}

// SetWall pairs the wall-clock instant ns (Unix ns, read by the server)
// with tw-time tick (the server's clock then), for the server's restart
// (see Wall). Recorded.
func (c *Core) SetWall(ns, tick uint64) {
	c.rec.wall(ns, tick)
	c.wallNs, c.wallTick = ns, tick
}

// Wall returns the last wall-clock instant recorded by SetWall and
// tw-time then (0, 0 when none was).
func (c *Core) Wall() (ns, tick uint64) { return c.wallNs, c.wallTick }

// More reports whether an advance left work for another turn (a burst
// bounded by its max, or a fast-forward), and clears the flag.
func (c *Core) More() bool {
	m := c.more
	c.more = false
	return m
}

// Waiters returns the number of fast-forwards waiting for their firings.
func (c *Core) Waiters() int { return len(c.waiters) }

// FiredTotal returns the number of firings so far.
func (c *Core) FiredTotal() uint64 { return c.firedTotal }

// Advance moves the wheel toward target (tw-time now: it never goes
// backwards, a smaller target is taken as the current one), firing at most
// maxFires timers (0 = no bound). It reports whether work is left for
// another turn. Recorded when it changes anything; one that only moves
// tw-time (nothing due on the way, no fast-forward waiting, no retained
// receiver to forget: expiryDue) is recorded lazily, before the next recorded input (see recorder.adv).
func (c *Core) Advance(target uint64, maxFires int) (more bool) {
	c.listLeft = c.listBudget() // a new loop turn
	return c.advance(target, maxFires)
}

// advance is Advance within a turn (a fast-forward's): the lists' share of
// the turn stays what is left of it.
func (c *Core) advance(target uint64, maxFires int) (more bool) {
	target = max(target, c.target)
	if target == c.target && c.caughtUp && len(c.bulk) == 0 && len(c.lists) == 0 {
		return false
	}
	if next, ok := c.wheel.NextEvent(); len(c.waiters) == 0 && len(c.bulk) == 0 && (!ok || next > target) && !c.expiryDue(target) {
		c.rec.deferAdvance(target, maxFires) // it only moves tw-time
	} else {
		c.rec.advance(target, maxFires)
	}
	c.target = target
	c.expireIdle()
	if len(c.bulk) > 0 {
		c.stepBulk() // bulk.go: a chunk of the bulk operations in progress, before the firings
	}
	if len(c.lists) > 0 {
		c.stepLists(true) // listwalk.go: a step of the lists in progress
	}
	_, done := c.wheel.Advance(target, maxFires, c.onFire)
	c.caughtUp = done
	c.answerWaiters(done)
	return !done || len(c.bulk) > 0 || len(c.lists) > 0
}

// answerWaiters replies to the fast-forwards whose target the wheel reached.
// done is the last Advance's: when it stopped at its max, Now is the tick
// of timers still due, so only targets before Now are reached.
func (c *Core) answerWaiters(done bool) {
	if len(c.waiters) == 0 {
		return
	}
	now := c.wheel.Now()
	oldest := now
	if !done {
		oldest, _ = c.wheel.OldestDue()
	}
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		// (done means now is the target, >= w.target. A bounded Advance
		// that stopped with timers left at w.target leaves now ==
		// w.target: answering then would put the reply before some of
		// the events it covers.)
		// A backlog may hold timers due before now: a bounded Advance
		// that left timers due lets the next one move time on (see
		// wheel.Advance), so the oldest of them must be past w.target.
		reached := done || now > w.target && oldest > w.target
		switch {
		case w.s == nil && w.done == nil: // its session closed
		case !reached:
			kept = append(kept, w)
		case w.done != nil:
			w.done(now, c.firedTotal-w.fired)
		default:
			w.s.out = protocol.AppendOK(w.s.out, w.id, now, c.firedTotal-w.fired)
			w.s.waiting = false
			c.markDirty(w.s)
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// FastForward moves tw-time on by ticks, as the admin op does, without a
// session: done is called (on a later Advance, or at once) with the new
// tw-time and the firings in between, once every timer up to it has fired
// (or with the tick a freeze stopped it at: stopFastForward). It returns
// ErrFastForwardOverflow, changing nothing, past MaxFastForwardTick.
// Recorded.
func (c *Core) FastForward(ticks uint64, done func(now, fired uint64)) error {
	_, err := c.fastForward(waiter{done: done}, ticks, 0, false)
	return err
}

// fastForward moves tw-time on by ticks and runs the first advance turn;
// w is answered once the wheel has fired everything up to the new
// tw-time. In a replay, target is the recorded tick instead of the hook's.
func (c *Core) fastForward(w waiter, ticks, target uint64, replay bool) (uint64, error) {
	now := c.Now()
	if ticks > math.MaxUint64-now {
		return 0, ErrFastForwardOverflow
	}
	if !replay && ticks > 0 && now+ticks > MaxFastForwardTick { // (a log from before the bound replays as it ran)
		return 0, ErrFastForwardOverflow
	}
	if !replay {
		target = now + ticks
		if c.clockHook != nil {
			target = max(target, c.clockHook(ClockFastForward, 0, ticks))
		}
	}
	c.rec.clock(w.s, w.id, ClockFastForward, 0, ticks, target)
	c.noteReplied(w.s, outLen(w.s))
	w.target, w.fired = target, c.firedTotal
	c.skipped = max(c.skipped, target)
	c.waiters = append(c.waiters, w)
	if w.s != nil {
		w.s.waiting = true // its next requests wait for the reply (answerWaiters)
	}
	c.caughtUp = false
	c.target = target
	if !replay { // the advance is an input of its own, recorded next
		c.more = c.advance(target, c.cfg.MaxFiresPerTurn) || c.more
	}
	return target, nil
}

// stopFastForward stops the fast-forwards in progress where the wheel is,
// for freeze: when the wheel has not reached tw-time's target and a
// fast-forward waits, tw-time goes back to the wheel's tick, and each
// fast-forward is answered with that tick once the wheel has fired
// everything due there (its reply says where it stopped). A catch-up with
// no fast-forward waiting is not stopped. It reports whether it stopped
// any, and the tick. Deterministic: a replay stops at the same tick.
func (c *Core) stopFastForward() (stopped bool, at uint64) {
	at = c.wheel.Now()
	if len(c.waiters) == 0 || c.target <= at {
		return false, 0
	}
	c.target = at
	c.skipped = min(c.skipped, at) // the ticks after it were not jumped over
	for i := range c.waiters {
		c.waiters[i].target = min(c.waiters[i].target, at)
	}
	c.caughtUp = false // the next advance answers them
	c.more = true
	return true, at
}

// clockOp applies freeze, resume or set_speed. In a replay, target is the
// recorded tick instead of the hook's. A freeze stops a fast-forward in
// progress where the wheel is (stopFastForward).
func (c *Core) clockOp(s *Session, id uint64, op ClockOp, speed float64, target uint64, replay bool) {
	var stopped bool
	var at uint64
	switch op {
	case ClockFreeze:
		c.frozen = true
		stopped, at = c.stopFastForward()
	case ClockResume:
		c.frozen = false
	case ClockSetSpeed:
		c.speed = speed
	}
	if !replay {
		target = c.target
		if c.clockHook != nil {
			target = max(target, c.clockHook(op, speed, 0))
			if stopped {
				target = c.clockHook(ClockStopAt, 0, at)
			}
		}
	}
	c.rec.clock(s, id, op, speed, 0, target)
	c.noteReplied(s, outLen(s))
	if target > c.target {
		c.target, c.caughtUp = target, false
	}
	if s != nil {
		s.out = protocol.AppendOK(s.out, id, c.Now())
	}
}
