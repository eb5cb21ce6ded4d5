package session

import (
	"fmt"
	"math/bits"

	"github.com/tickwheel/tickwheel/protocol"
)

// SetInstantHook sets the function that reads where tw-time is inside the
// current tick: the server's clock tick and the nanoseconds of tw-time
// past its boundary (wheel.Clock.Instant). An add with after_ns counts its
// duration from that instant, so it never fires early; the Core records
// the reading before the add, so a replay needs no clock. Without a hook
// (a test) the instant is the start of the current tick, Now.
func (c *Core) SetInstantHook(fn func() (tick, sub uint64)) { c.instantHook = fn }

// readInstant takes the instant the add about to be applied counts from
// and records it. During a replay it keeps the recorded one.
func (c *Core) readInstant() {
	if c.replaying {
		return
	}
	c.instTick, c.instSub = c.Now(), 0
	if c.instantHook != nil {
		c.instTick, c.instSub = c.instantHook()
	}
	c.rec.instant(c.instTick, c.instSub)
}

// afterNs converts an add's after_ns into after (ticks from Now) and every
// (when the add gives none): the first due tick is the first boundary at or
// after the instant read for it plus afterNs of tw-time, and the interval
// is afterNs rounded up to whole ticks. It answers the error itself and
// returns false when the add cannot be made.
func (c *Core) afterNs(s *Session, req *protocol.Request) (after, every uint64, ok bool) {
	tickNs := c.cfg.TickNs
	if tickNs == 0 {
		c.fail(s, req.ID, protocol.CodeInvalidArgument, "after_ns: the server has no tick length")
		return 0, 0, false
	}
	now := c.Now()
	tick, sub := c.instTick, c.instSub
	if tick < now || sub >= tickNs { // never counts from before Now's boundary
		tick, sub = now, 0
	}
	// ceil((sub + afterNs) / tickNs), in 128 bits.
	lo, carry := bits.Add64(sub, req.AfterNs, 0)
	q, r := bits.Div64(carry, lo, tickNs)
	if r != 0 {
		q++ // cannot wrap: q <= 2^64 / tickNs
	}
	due, over := bits.Add64(tick, q, 0)
	if over != 0 {
		c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf("after_ns %d from tick %d would pass tw-time 2^64-1", req.AfterNs, tick))
		return 0, 0, false
	}
	every = req.Every
	if every == 0 {
		every = req.AfterNs / tickNs
		if req.AfterNs%tickNs != 0 {
			every++
		}
	}
	return due - now, every, true
}
