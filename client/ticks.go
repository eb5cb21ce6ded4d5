package client

import (
	"fmt"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// Ticks converts d to a number of ticks of length tick, rounding up so that
// a timer set for d never fires early: Ticks(25ms, 10ms) is 3, Ticks(20ms,
// 10ms) is 2, Ticks(1ns, 10ms) is 1. It returns 0 when d <= 0 or tick <= 0.
func Ticks(d, tick time.Duration) uint64 {
	if d <= 0 || tick <= 0 {
		return 0
	}
	n := uint64(d / tick)
	if d%tick != 0 {
		n++
	}
	return n
}

// Ticks converts d to ticks of the server's tick length (TickDuration),
// rounding up; see the package function Ticks.
func (c *Client) Ticks(d time.Duration) uint64 { return Ticks(d, c.TickDuration()) }

// durationTicks converts a positive duration for op, or returns an
// ErrInvalidArgument *Error.
func (c *Client) durationTicks(op protocol.Op, what string, d time.Duration) (uint64, error) {
	if d <= 0 {
		return 0, &Error{Op: op, Code: protocol.CodeInvalidArgument, Message: fmt.Sprintf("%s %v: must be positive", what, d)}
	}
	tick := c.TickDuration()
	if tick <= 0 {
		return 0, &Error{Op: op, Code: protocol.CodeInvalidArgument, Message: "the server reported no tick length"}
	}
	return Ticks(d, tick), nil
}

// afterTicks is AddAfter's after: d in ticks, rounded up, or 0 for d <= 0
// (a zero delay: the server fires it at its next tick).
func (c *Client) afterTicks(d time.Duration) (uint64, error) {
	if d <= 0 {
		return 0, nil
	}
	return c.durationTicks(protocol.OpAdd, "after", d)
}
