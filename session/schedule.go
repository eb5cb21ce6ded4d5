package session

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// Calendar schedules and missed-firing policies (issue 15, parts 3 and 4).
//
// The wheel knows only intervals. A timer added with a schedule, or with a
// missed-firing policy other than MissedAll, also has a plan the Core keeps
// beside the wheel, by key:
//
//   - A cron schedule: the wheel holds the timer at its next due tick; each
//     firing (onFire, before the event is routed) computes the next from
//     the schedule and the tick it was due at (no drift) and moves the
//     timer there (wheel.Reschedule). A schedule with no next firing (past
//     year 9999) makes that firing the last. @every is a plain interval in
//     the wheel: the plan only remembers the text for get and list.
//   - Missed firings: when the server restarts with downtime: catch-up,
//     it tells the Core the downtime as a recorded input (Downtime: the
//     tw-time the state stopped at and the one it resumes at). A timer
//     whose firings fell strictly between them follows its policy: all
//     delivers them in order, each marked late (the wheel does that by
//     itself); once delivers the first, late, then moves the timer to its
//     first firing on schedule at or after the restart; skip delivers none
//     and moves it there at once. Only delivered firings count: fired and
//     repeat count deliveries, so a timer "×5" still delivers 5 times. A
//     one-shot timer (repeat 1) always delivers its missed firing.
//     Fast-forward is not downtime: it always delivers every firing.
//   - Resume of a paused cron timer moves it to its schedule's next time
//     after tw-time now (its remaining ticks are not kept: the schedule
//     says when it fires).
//
// Plans are state: the snapshot holds them (version 3) and the add
// requests that make them are in the log, so a replay rebuilds them.

// inDowntime is the record kind of a Downtime input: from, to. (The other
// kinds are in record.go.)
const inDowntime = 20

// timerPlan is what the Core keeps for a timer beside the wheel.
type timerPlan struct {
	cal    *calendar // nil: no schedule
	missed uint8     // protocol.MissedAll, MissedOnce or MissedSkip
	// catchUp, when not 0, is the restart tick after which a MissedOnce
	// timer's next firing, its one late firing, moves it back on schedule.
	catchUp uint64
	// overdue, when not 0, is how many ticks a timer added with an at in
	// the past was overdue when added (soonest, add.go): its first firing
	// reports them in late, on top of its own lateness (takeOverdue).
	overdue uint64
}

// empty reports whether p holds nothing: a timer needs no plan.
func (p *timerPlan) empty() bool {
	return p.cal == nil && p.missed == protocol.MissedAll && p.catchUp == 0 && p.overdue == 0
}

// follows reports whether the plan moves the timer after each firing (a
// cron schedule, not @every).
func (p *timerPlan) follows() bool { return p.cal != nil && p.cal.spec != nil }

// scheduler is the Core's part for plans.
type scheduler struct {
	plans map[wheel.Key]*timerPlan
	zones *zoneCache // zones looked up, and names that are not zones (zones.go)
	// cals shares parsed calendars (immutable) between the timers with
	// the same expression and zone, up to maxSharedCalendars of them.
	cals map[calKey]*calendar
	// downFrom and downTo are the last downtime (Downtime): firings due
	// strictly between them fell in it. 0, 0: none.
	downFrom, downTo uint64
}

// planAdd checks add req's schedule, zone and missed arguments and sets
// spec's first firing from the schedule. It returns the plan to keep for
// the timer (nil when it needs none), or replies with the error and
// returns ok false.
func (c *Core) planAdd(s *Session, req *protocol.Request, spec *wheel.Spec) (p *timerPlan, ok bool) {
	bad := func(format string, args ...any) (*timerPlan, bool) {
		c.fail(s, req.ID, protocol.CodeInvalidArgument, fmt.Sprintf(format, args...))
		return nil, false
	}
	switch {
	case req.Missed > protocol.MissedSkip:
		return bad("missed %d: want 0 (all), 1 (once) or 2 (skip)", req.Missed)
	case req.Schedule == "" && req.Zone != "":
		return bad("zone %q without a schedule", req.Zone)
	case req.Schedule == "" && req.Missed == protocol.MissedAll:
		return nil, true
	case req.Schedule == "":
		return &timerPlan{missed: uint8(req.Missed)}, true
	case req.After != 0 || req.At != 0 || req.Every != 0 || req.AfterNs != 0:
		return bad("schedule %q: an add with a schedule takes no after, at, after_ns or every: the schedule says when it fires", req.Schedule)
	}
	cal, err := c.calendar(req.Schedule, req.Zone)
	if err != nil {
		return bad("%v", err)
	}
	p = &timerPlan{cal: cal, missed: uint8(req.Missed)}
	if !p.follows() { // @every: an interval the wheel keeps
		spec.After, spec.Every = cal.every, cal.every
		return p, true
	}
	first, ok := cal.next(c.Now(), c.cfg.TickNs)
	if !ok {
		return bad("schedule %q: no firing after tw-time %d", req.Schedule, c.Now())
	}
	spec.At = first
	return p, true
}

// calKey identifies a parsed calendar: expression and zone.
type calKey struct{ expr, zone string }

// maxSharedCalendars bounds the calendars kept for sharing; past it each
// timer parses its own (they are immutable, so sharing is only memory).
const maxSharedCalendars = 4096

// calendar returns the parsed calendar of expr in zone, shared with the
// timers that have the same.
func (c *Core) calendar(expr, zone string) (*calendar, error) {
	k := calKey{expr, zone}
	if cal := c.sched.cals[k]; cal != nil {
		return cal, nil
	}
	if c.sched.zones == nil {
		c.sched.zones = newZoneCache()
		c.sched.cals = make(map[calKey]*calendar)
	}
	misses := c.sched.zones.misses
	cal, err := parseCalendar(expr, zone, c.cfg.TickNs, c.sched.zones)
	if c.sched.zones.misses != misses {
		c.work += zoneLookupWork // a look-up of the file system: see zoneCache
	}
	if err == nil && len(c.sched.cals) < maxSharedCalendars {
		c.sched.cals[k] = cal
	}
	return cal, err
}

// setPlan keeps p as timer k's plan (nil: it has none, as after a replace
// by a plain timer).
func (c *Core) setPlan(k wheel.Key, p *timerPlan) {
	switch {
	case p != nil:
		if c.sched.plans == nil {
			c.sched.plans = make(map[wheel.Key]*timerPlan)
		}
		c.sched.plans[k] = p
	case len(c.sched.plans) > 0:
		delete(c.sched.plans, k)
	}
}

// dropPlan forgets timer k's plan (it was cancelled).
func (c *Core) dropPlan(k wheel.Key) {
	if len(c.sched.plans) > 0 {
		delete(c.sched.plans, k)
	}
}

// dropPlans forgets the plans of receiver r's timers (all cancelled).
func (c *Core) dropPlans(r uint64) {
	for k := range c.sched.plans {
		if k.Receiver == r {
			delete(c.sched.plans, k)
		}
	}
}

// planFire applies timer f's plan to its firing, before the event is
// routed: it moves the timer to its next firing (schedule, or back on
// schedule after a downtime), or makes this firing the last. It returns
// the ticks the timer was overdue when added, for its first firing's late
// (0 after it).
func (c *Core) planFire(f *wheel.Fire) (overdue uint64) {
	p := c.sched.plans[f.Key]
	if p == nil {
		return 0
	}
	overdue, p.overdue = p.overdue, 0 // its first firing reports it
	if p.empty() {
		delete(c.sched.plans, f.Key) // it was kept for overdue only
		return overdue
	}
	if f.Last {
		delete(c.sched.plans, f.Key)
		return overdue
	}
	if p.catchUp != 0 && f.Tick >= p.catchUp {
		p.catchUp = 0 // paused through the downtime's end: it fires on time
	}
	var next uint64
	var ok bool
	switch {
	case p.catchUp != 0: // MissedOnce: this was its one late firing
		next, ok = c.onSchedule(f.Key, p, f.Tick, p.catchUp)
		p.catchUp = 0
	case p.follows():
		next, ok = p.cal.next(f.Tick, c.cfg.TickNs)
	case p.missed == protocol.MissedAll || f.Tick > c.sched.downFrom:
		return overdue // the wheel re-armed it by its interval
	default:
		in, err := c.wheel.Get(f.Key)
		next, ok = in.Due, err == nil
	}
	if !ok || next <= f.Tick { // nothing on schedule any more
		_ = c.wheel.Cancel(f.Key)
		delete(c.sched.plans, f.Key)
		f.Last = true
		return overdue
	}
	if p.missed != protocol.MissedAll && f.Tick <= c.sched.downFrom && next > c.sched.downFrom && next < c.sched.downTo {
		// Due before the downtime, fired in the catch-up after it: its
		// next firing is a missed one.
		next = c.missedPolicy(f.Key, p, next)
	}
	_ = c.wheel.Reschedule(f.Key, next) // next > f.Tick = Now(): cannot fail
	return overdue
}

// missedPolicy applies p's policy to timer k whose next firing, due, fell
// in the downtime, and returns the tick it is due at now.
func (c *Core) missedPolicy(k wheel.Key, p *timerPlan, due uint64) uint64 {
	to := c.sched.downTo
	switch p.missed {
	case protocol.MissedOnce:
		p.catchUp = to
	case protocol.MissedSkip:
		if n, ok := c.onSchedule(k, p, due, to); ok {
			return n
		}
	}
	return due
}

// onSchedule returns timer k's first firing on schedule at or after tick
// to, counting from due, a tick it was due at (before to).
func (c *Core) onSchedule(k wheel.Key, p *timerPlan, due, to uint64) (uint64, bool) {
	if p.follows() {
		return p.cal.next(to-1, c.cfg.TickNs)
	}
	in, err := c.wheel.Get(k)
	if err != nil || in.Every == 0 {
		return 0, false
	}
	if due >= to {
		return due, true
	}
	steps := (to - due + in.Every - 1) / in.Every
	if steps > (math.MaxUint64-due)/in.Every {
		return 0, false
	}
	return due + steps*in.Every, true
}

// Downtime tells the Core that the server was down from tw-time from to
// tw-time to, and catches up after it (downtime: catch-up): timers whose
// firings fell strictly between follow their missed-firing policy (see
// above). Call it at restart, before the first Advance. Recorded.
func (c *Core) Downtime(from, to uint64) {
	if to <= from {
		return
	}
	if c.rec.begin() {
		c.rec.buf = append(c.rec.buf, inDowntime)
		c.rec.uv(from)
		c.rec.uv(to)
	}
	c.sched.downFrom, c.sched.downTo = from, to
	for _, k := range sortedPlanKeys(c.sched.plans) {
		p := c.sched.plans[k]
		if p.missed == protocol.MissedAll {
			continue
		}
		in, err := c.wheel.Get(k)
		if err != nil || in.Paused || in.Repeat == 1 || in.Due <= from || in.Due >= to {
			continue
		}
		if due := c.missedPolicy(k, p, in.Due); due != in.Due {
			_ = c.wheel.Reschedule(k, due) // due > in.Due >= Now()
		}
	}
}

// planResumed moves a resumed cron timer k to its schedule's next time,
// whether its user or the server (a held timer, outbox.go) resumes it.
func (c *Core) planResumed(k wheel.Key) {
	if p := c.sched.plans[k]; p != nil && p.follows() {
		if next, ok := p.cal.next(c.Now(), c.cfg.TickNs); ok {
			_ = c.wheel.Reschedule(k, next)
		}
	}
}

// describePlan adds timer t's plan to its description: a cron timer's
// every reads 0 (its schedule, not an interval, says when it fires; an
// @every timer's reads its interval), and a paused cron timer's due is
// where a resume now would move it, its schedule's next time after now
// (not now + remaining: planResumed).
func (c *Core) describePlan(t *protocol.Timer) {
	p := c.sched.plans[wheel.Key{Receiver: t.Receiver, Tid: t.Tid}]
	if p == nil {
		return
	}
	if p.cal != nil {
		t.Schedule, t.Zone = p.cal.expr, p.cal.zone
	}
	if p.follows() {
		t.Every = 0
		if now := c.Now(); t.Paused {
			if next, ok := p.cal.next(now, c.cfg.TickNs); ok {
				t.Due, t.Remaining = next, next-now
			}
		}
	}
	t.Missed = uint64(p.missed)
}

func sortedPlanKeys(m map[wheel.Key]*timerPlan) []wheel.Key {
	keys := make([]wheel.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b wheel.Key) int {
		return cmp.Or(cmp.Compare(a.Receiver, b.Receiver), cmp.Compare(a.Tid, b.Tid))
	})
	return keys
}

// appendPlans appends the plans of the live timers, by key, and the last
// downtime (snapshot version 3).
func (c *Core) appendPlans(e *encoder) {
	e.uv(c.sched.downFrom)
	e.uv(c.sched.downTo)
	keys := sortedPlanKeys(c.sched.plans)
	live := keys[:0]
	for _, k := range keys {
		if _, err := c.wheel.Get(k); err == nil {
			live = append(live, k)
		}
	}
	e.int(len(live))
	for _, k := range live {
		p := c.sched.plans[k]
		e.uv(k.Receiver)
		e.uv(k.Tid)
		var expr, zone string
		if p.cal != nil {
			expr, zone = p.cal.expr, p.cal.zone
		}
		e.bytes([]byte(expr))
		e.bytes([]byte(zone))
		e.b = append(e.b, p.missed)
		e.uv(p.catchUp)
		e.uv(p.overdue)
	}
}

// restorePlans reads what appendPlans wrote, parsing the schedules again.
func (c *Core) restorePlans(d *decoder) {
	c.sched.downFrom, c.sched.downTo = d.uv(), d.uv()
	for range d.count() {
		k := wheel.Key{Receiver: d.uv(), Tid: d.uv()}
		expr, zone := string(d.bytes()), string(d.bytes())
		p := &timerPlan{missed: d.byte(), catchUp: d.uv()}
		if d.version >= 9 {
			p.overdue = d.uv()
		}
		if d.err != nil {
			return
		}
		if p.missed > protocol.MissedSkip {
			d.fail(fmt.Errorf("timer %d/%d: missed policy %d", k.Receiver, k.Tid, p.missed))
			return
		}
		if expr != "" {
			cal, err := c.calendar(expr, zone)
			if err != nil {
				d.fail(fmt.Errorf("timer %d/%d: %v", k.Receiver, k.Tid, err))
				return
			}
			p.cal = cal
		}
		c.setPlan(k, p)
	}
}

// replayMore applies the recorded inputs of this file's kinds.
func (c *Core) replayMore(kind byte, d *decoder) error {
	switch kind {
	case inDowntime:
		from, to := d.uv(), d.uv()
		if d.err == nil {
			c.Downtime(from, to)
		}
		return d.err
	}
	return fmt.Errorf("unknown input kind %d", kind)
}
