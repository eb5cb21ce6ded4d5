package client

import (
	"context"

	"github.com/tickwheel/tickwheel/protocol"
)

// Missed is a timer's policy for the firings that fall in a server's
// downtime, when the server restarts with downtime: catch-up and moves
// tw-time on by the time it was down. It applies only to downtime: a
// fast-forward always delivers every firing.
type Missed uint8

// The missed-firing policies.
const (
	// MissedAll delivers every missed firing, in order, each marked late
	// (Event.Late > 0). The default.
	MissedAll Missed = protocol.MissedAll
	// MissedOnce delivers the first missed firing, late, then goes on with
	// the first firing on schedule after the restart.
	MissedOnce Missed = protocol.MissedOnce
	// MissedSkip delivers none of them: the next firing is the first on
	// schedule after the restart. A one-shot timer (Repeat 1) still
	// delivers its missed firing.
	MissedSkip Missed = protocol.MissedSkip
)

// Firings skipped by MissedOnce and MissedSkip do not count: Event.Fired
// and AddOptions.Repeat count deliveries.

// AddSchedule adds timer tid of receiver on a calendar schedule and
// returns the tick of its first firing. schedule is a cron expression: 5
// fields (minute hour day-of-month month day-of-week, with *, lists,
// ranges, steps and jan..dec / sun..sat names) or a descriptor (@yearly,
// @monthly, @weekly, @daily, @hourly, or @every with a duration such as
// @every 90s, which is an interval rounded up to whole ticks).
//
// It is evaluated on tw-time's calendar in o.Zone (an IANA name such as
// Europe/Paris; "" is UTC): tick t is the instant t × tick length after
// the Unix epoch, so fast-forwarding tw-time by a day fires a daily timer
// once. Each firing computes the next from the schedule (no drift). A time
// that does not exist (a spring-forward gap) fires once at the gap's end;
// a time that occurs twice (fall-back) fires once, at its first
// occurrence.
//
// o.Repeat 0 (or o nil) fires at every time the schedule names until
// cancelled; N > 0 fires N times. o.Every must be 0. A bad expression or
// zone is ErrInvalidArgument with a message that names the field or the
// zone. Get and List return the schedule, zone and policy with the next
// due tick (Timer.Due); a cron timer's Timer.Every is 0. Pause keeps it;
// Resume moves it to its schedule's next time after now.
func (c *Client) AddSchedule(ctx context.Context, receiver, tid uint64, schedule string, o *AddOptions) (due uint64, err error) {
	return c.add(ctx, receiver, tid, 0, 0, withSchedule(o, schedule))
}

// withSchedule returns a copy of o (nil: the defaults) with its Schedule
// set.
func withSchedule(o *AddOptions, schedule string) *AddOptions {
	var opts AddOptions
	if o != nil {
		opts = *o
	}
	opts.Schedule = schedule
	return &opts
}

// schedule puts o's schedule, zone and missed-firing policy into req. A
// schedule names many times: with Repeat 0 it fires at each, until
// cancelled (the wire's repeat 0).
func (o *AddOptions) schedule(req *protocol.Request) {
	req.Schedule, req.Zone, req.Missed = o.Schedule, o.Zone, uint64(o.Missed)
	if o.Schedule != "" && o.Repeat == 0 {
		req.Repeat = 0
	}
}
