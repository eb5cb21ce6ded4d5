package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

const schedRecv = 7

// schedHarness returns a harness and a session bound to schedRecv.
func schedHarness(t *testing.T) (*harness, *Session) {
	h := newHarness(t, nil)
	s := h.session()
	m := h.do(s, protocol.Request{Op: protocol.OpBind, ID: 1, Receiver: schedRecv})
	require.Equal(t, protocol.KindOK, m[0].Kind)
	return h, s
}

// fastForward moves tw-time on by ticks and returns the firings s got.
func (h *harness) fastForward(s *Session, ticks uint64) []protocol.Fire {
	h.send(s, protocol.Request{Op: protocol.OpFastForward, ID: 99, Ticks: ticks})
	h.catchUp()
	return fires(h.take(s))
}

func fires(ms []protocol.Message) []protocol.Fire {
	var out []protocol.Fire
	for _, m := range ms {
		if m.Kind == protocol.KindFire {
			out = append(out, m.Fire)
		}
	}
	return out
}

// wallOfTick reads tick (10 ms ticks) as wall-clock time in zone.
func wallOfTick(tick uint64, zone string) string {
	loc, _ := time.LoadLocation(zone)
	return time.Unix(0, int64(tick*10_000_000)).In(loc).Format("2006-01-02 15:04 MST")
}

func (h *harness) getTimer(s *Session, tid uint64) protocol.Timer {
	m := h.do(s, protocol.Request{Op: protocol.OpGet, ID: 5, Receiver: schedRecv, Tid: tid})
	require.Equal(h.t, protocol.KindOK, m[0].Kind, m[0].Text)
	var tm protocol.Timer
	require.NoError(h.t, protocol.DecodeTimer(m[0].Result, &tm))
	return tm
}

// A daily 04:00 Europe/Paris timer fires once per day of fast-forwarded
// tw-time, at 04:00 Paris time, across the spring-forward night; get
// shows its schedule and next due tick.
func TestScheduleDailyResetFastForward(t *testing.T) {
	h, s := schedHarness(t)
	// Move tw-time to 2026-03-27 12:00 UTC first.
	day0 := uint64(time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC).UnixNano() / 10_000_000)
	h.fastForward(s, day0-h.c.Now())
	m := h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: schedRecv, Tid: 1, Schedule: "0 4 * * *", Zone: "Europe/Paris"})
	due := okUints(t, protocol.OpAdd, m[0])[0]
	assert.Equal(t, "2026-03-28 04:00 CET", wallOfTick(due, "Europe/Paris"))
	tm := h.getTimer(s, 1)
	assert.Equal(t, protocol.Timer{Receiver: schedRecv, Tid: 1, Due: due, Remaining: due - h.c.Now(), Schedule: "0 4 * * *", Zone: "Europe/Paris"}, tm)

	var got []string
	for range 3 {
		for _, f := range h.fastForward(s, 24*360_000) {
			got = append(got, fmt.Sprintf("%s #%d late %d", wallOfTick(f.Tick, "Europe/Paris"), f.Fired, f.Late))
		}
	}
	assert.Equal(t, []string{"2026-03-28 04:00 CET #1 late 0", "2026-03-29 04:00 CEST #2 late 0", "2026-03-30 04:00 CEST #3 late 0"}, got)
}

// Repeat counts firings of a scheduled timer: the last one closes it.
func TestScheduleRepeatAndLast(t *testing.T) {
	h, s := schedHarness(t)
	h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: schedRecv, Tid: 1, Schedule: "@hourly", Repeat: 2, Data: []byte("x")})
	fs := h.fastForward(s, 5*360_000)
	require.Len(t, fs, 2)
	assert.Equal(t, []bool{false, true}, []bool{fs[0].Last, fs[1].Last})
	assert.Equal(t, uint64(360_000), fs[1].Tick-fs[0].Tick)
	assert.Equal(t, uint64(0), fs[0].Tick%360_000, "on the hour")
	assert.Empty(t, h.c.sched.plans)
	m := h.do(s, protocol.Request{Op: protocol.OpGet, ID: 3, Receiver: schedRecv, Tid: 1})
	assert.Equal(t, protocol.CodeNotFound, m[0].Code)
}

// Bad schedules, zones and policies are invalid_argument, naming what is
// wrong; nothing is added.
func TestScheduleAddErrors(t *testing.T) {
	h, s := schedHarness(t)
	cases := []struct {
		req  protocol.Request
		want string
	}{
		{protocol.Request{Schedule: "0 25 * * *"}, `schedule "0 25 * * *": field 2 (hour): 25 is above the maximum 23`},
		{protocol.Request{Schedule: "0 4 * * *", Zone: "Europe/Pariss"}, `zone "Europe/Pariss": not a known IANA time zone`},
		{protocol.Request{Schedule: "0 4 * * *", After: 5}, "takes no after, at, after_ns or every"},
		{protocol.Request{Schedule: "0 4 * * *", Every: 5}, "takes no after, at, after_ns or every"},
		{protocol.Request{After: 5, Zone: "UTC"}, `zone "UTC" without a schedule`},
		{protocol.Request{After: 5, Missed: 3}, "missed 3: want 0 (all), 1 (once) or 2 (skip)"},
		{protocol.Request{Schedule: "0 0 31 2 *"}, "no firing after tw-time"},
	}
	for _, tc := range cases {
		req := tc.req
		req.Op, req.ID, req.Receiver, req.Tid = protocol.OpAdd, 4, schedRecv, 1
		m := h.do(s, req)
		require.Equal(t, protocol.KindError, m[0].Kind, tc.want)
		assert.Equal(t, protocol.CodeInvalidArgument, m[0].Code)
		assert.Contains(t, m[0].Text, tc.want)
	}
	assert.Zero(t, h.c.wheel.Len())
	assert.Empty(t, h.c.sched.plans)
}

// A resumed cron timer fires at its schedule's next time; a replace by a
// plain timer, a cancel and a cancel_all forget the plan.
func TestSchedulePauseResumeReplaceCancel(t *testing.T) {
	h, s := schedHarness(t)
	add := func(req protocol.Request) {
		req.Op, req.ID, req.Receiver = protocol.OpAdd, 2, schedRecv
		m := h.do(s, req)
		require.Equal(t, protocol.KindOK, m[0].Kind, m[0].Text)
	}
	add(protocol.Request{Tid: 1, Schedule: "*/10 * * * *"})
	require.Equal(t, protocol.KindOK, h.do(s, protocol.Request{Op: protocol.OpPause, ID: 3, Receiver: schedRecv, Tid: 1})[0].Kind)
	assert.Empty(t, h.fastForward(s, 25*6000+100)) // 25 minutes and a second, paused
	require.Equal(t, protocol.KindOK, h.do(s, protocol.Request{Op: protocol.OpResume, ID: 3, Receiver: schedRecv, Tid: 1})[0].Kind)
	tm := h.getTimer(s, 1)
	assert.Equal(t, uint64(0), tm.Due%60_000, "back on a 10-minute boundary")
	assert.LessOrEqual(t, tm.Due-h.c.Now(), uint64(60_000))

	add(protocol.Request{Tid: 1, After: 50, Replace: true})
	tm = h.getTimer(s, 1)
	assert.Empty(t, tm.Schedule)
	assert.Empty(t, h.c.sched.plans)

	add(protocol.Request{Tid: 2, Schedule: "@every 90s", Missed: protocol.MissedSkip})
	add(protocol.Request{Tid: 3, Schedule: "@daily"})
	tm = h.getTimer(s, 2)
	assert.Equal(t, uint64(9000), tm.Every)
	assert.Equal(t, "@every 90s", tm.Schedule)
	assert.Equal(t, uint64(protocol.MissedSkip), tm.Missed)
	h.do(s, protocol.Request{Op: protocol.OpCancel, ID: 5, Receiver: schedRecv, Tid: 2})
	assert.Len(t, h.c.sched.plans, 1)
	h.do(s, protocol.Request{Op: protocol.OpCancelAll, ID: 6, Receiver: schedRecv})
	assert.Empty(t, h.c.sched.plans)
}

// A snapshot holds the plans: the restored Core snapshots to the same
// bytes and fires the scheduled timer at the same ticks.
func TestScheduleSnapshot(t *testing.T) {
	h, s := schedHarness(t)
	for i, req := range []protocol.Request{
		{Tid: 1, Schedule: "0 18 * * fri", Zone: "America/New_York", Missed: protocol.MissedOnce},
		{Tid: 2, After: 100, Every: 100, Missed: protocol.MissedSkip},
		{Tid: 3, Schedule: "@every 1m"},
	} {
		req.Op, req.ID, req.Receiver = protocol.OpAdd, uint64(10+i), schedRecv
		require.Equal(t, protocol.KindOK, h.do(s, req)[0].Kind)
	}
	h.c.Downtime(h.c.Now(), h.c.Now()+1) // a downtime span to carry
	encode := func(c *Core) []byte {
		snap := c.Snapshot()
		defer snap.Release()
		b, _ := snap.AppendNext(nil, 0)
		return b
	}
	data := encode(h.c)
	r, err := Restore(h.c.cfg, data, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, data, encode(r))
	require.Len(t, r.sched.plans, 3)
	assert.Equal(t, h.c.sched.downTo, r.sched.downTo)
	var a, b []uint64
	target := h.c.Now() + 9*24*360_000 // from Thursday 1970-01-01 02:46 UTC
	h.c.Advance(target, 0)
	r.Advance(target, 0)
	for _, c := range []*Core{h.c, r} {
		in, err := c.wheel.Get(wheel.Key{Receiver: schedRecv, Tid: 1})
		require.NoError(t, err)
		if c == h.c {
			a = append(a, in.Due, in.Fired)
		} else {
			b = append(b, in.Due, in.Fired)
		}
	}
	assert.Equal(t, a, b)
	assert.Equal(t, uint64(2), a[1], "fired on two Fridays")
	h.rep.sync()
}

// downtimeCase adds one timer, has the server down from now to now+down,
// catches up and returns the firings as "tick-offset/fired/late".
func downtimeCase(t *testing.T, req protocol.Request, down, after uint64) []string {
	h, s := schedHarness(t)
	req.Op, req.ID, req.Receiver, req.Tid = protocol.OpAdd, 2, schedRecv, 1
	m := h.do(s, req)
	require.Equal(t, protocol.KindOK, m[0].Kind, m[0].Text)
	from := h.c.Now()
	h.c.Downtime(from, from+down)
	h.c.Advance(from+down, 0) // the catch-up turn after the restart
	h.rep.sync()
	got := fires(h.take(s))
	got = append(got, h.fastForward(s, after)...)
	var out []string
	for _, f := range got {
		out = append(out, fmt.Sprintf("%d/%d/%d", f.Tick-from, f.Fired, f.Late))
	}
	return out
}

// The missed-firing policies, on an interval timer and on a cron timer:
// all delivers every missed firing late, once the first then back on
// schedule, skip none. Fired counts deliveries. Firings due at or after
// the restart are on time.
func TestScheduleMissedPolicies(t *testing.T) {
	every := protocol.Request{After: 10, Every: 10, Repeat: 0}
	for _, tc := range []struct {
		missed uint64
		want   []string
	}{
		{protocol.MissedAll, []string{"10/1/25", "20/2/15", "30/3/5", "40/4/0", "50/5/0"}},
		{protocol.MissedOnce, []string{"10/1/25", "40/2/0", "50/3/0"}},
		{protocol.MissedSkip, []string{"40/1/0", "50/2/0"}},
	} {
		req := every
		req.Missed = tc.missed
		assert.Equal(t, tc.want, downtimeCase(t, req, 35, 15), "every 10, missed %d", tc.missed)
	}
	// A cron timer, every minute (6000 ticks), down 3.5 minutes. start
	// (1_000_000 ticks, 02:46:40 UTC) is 2000 ticks before a minute.
	for _, tc := range []struct {
		missed uint64
		want   []string
	}{
		{protocol.MissedAll, []string{"2000/1/19000", "8000/2/13000", "14000/3/7000", "20000/4/1000", "26000/5/0"}},
		{protocol.MissedOnce, []string{"2000/1/19000", "26000/2/0"}},
		{protocol.MissedSkip, []string{"26000/1/0"}},
	} {
		req := protocol.Request{Schedule: "* * * * *", Missed: tc.missed}
		assert.Equal(t, tc.want, downtimeCase(t, req, 21000, 6000), "cron, missed %d", tc.missed)
	}
	// A one-shot timer always delivers its missed firing.
	assert.Equal(t, []string{"10/1/25"}, downtimeCase(t, protocol.Request{After: 10, Repeat: 1, Missed: protocol.MissedSkip}, 35, 15))
	// Repeat counts deliveries: ×2 with skip still fires twice.
	assert.Equal(t, []string{"40/1/0", "50/2/0"}, downtimeCase(t, protocol.Request{After: 10, Every: 10, Repeat: 2, Missed: protocol.MissedSkip}, 35, 30))
}

// Fast-forward is not downtime: every firing is delivered, whatever the
// policy.
func TestScheduleFastForwardDeliversAll(t *testing.T) {
	h, s := schedHarness(t)
	h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: schedRecv, Tid: 1, After: 10, Every: 10, Missed: protocol.MissedSkip})
	h.do(s, protocol.Request{Op: protocol.OpAdd, ID: 3, Receiver: schedRecv, Tid: 2, Schedule: "* * * * *", Missed: protocol.MissedSkip})
	fs := h.fastForward(s, 30_000)
	n := map[uint64]int{}
	for _, f := range fs {
		n[f.Tid]++
		assert.Zero(t, f.Late)
	}
	assert.Equal(t, map[uint64]int{1: 3000, 2: 5}, n)
}

// dumpPlans renders the plans for the replica check.
func dumpPlans(c *Core) string {
	var b strings.Builder
	fmt.Fprintf(&b, "downtime %d..%d", c.sched.downFrom, c.sched.downTo)
	for _, k := range sortedPlanKeys(c.sched.plans) {
		p := c.sched.plans[k]
		expr := ""
		if p.cal != nil {
			expr = p.cal.expr + " " + p.cal.zone
		}
		fmt.Fprintf(&b, " %d/%d[%s|%d|%d]", k.Receiver, k.Tid, expr, p.missed, p.catchUp)
	}
	return b.String()
}

// A MissedOnce timer paused before its late firing and resumed after the
// downtime fires once per tick on schedule, never twice on one tick.
func TestScheduleOncePausedThroughDowntime(t *testing.T) {
	for _, req := range []protocol.Request{
		{After: 10, Every: 10, Missed: protocol.MissedOnce},
		{Schedule: "* * * * *", Missed: protocol.MissedOnce},
	} {
		h, s := schedHarness(t)
		req.Op, req.ID, req.Receiver, req.Tid = protocol.OpAdd, 2, schedRecv, 1
		require.Equal(t, protocol.KindOK, h.do(s, req)[0].Kind)
		from := h.c.Now()
		h.c.Downtime(from, from+30_000)
		h.do(s, protocol.Request{Op: protocol.OpPause, ID: 3, Receiver: schedRecv, Tid: 1})
		h.c.Advance(from+30_000, 0)
		h.rep.sync()
		h.do(s, protocol.Request{Op: protocol.OpResume, ID: 4, Receiver: schedRecv, Tid: 1})
		fs := h.fastForward(s, 20_000)
		require.NotEmpty(t, fs)
		for i := 1; i < len(fs); i++ {
			assert.Greater(t, fs[i].Tick, fs[i-1].Tick, "%q: one firing per tick", req.Schedule)
		}
		assert.Equal(t, uint64(1), fs[0].Fired)
	}
}

// A timer due before the downtime that the wheel had not fired yet (it
// trailed tw-time at the crash) fires late, then applies its policy to the
// firings in the downtime.
func TestScheduleMissedWheelBehind(t *testing.T) {
	h, s := schedHarness(t)
	for tid, m := range []uint64{protocol.MissedAll, protocol.MissedSkip} {
		req := protocol.Request{Op: protocol.OpAdd, ID: 2, Receiver: schedRecv, Tid: uint64(tid + 1), After: 10, Every: 10, Missed: m}
		require.Equal(t, protocol.KindOK, h.do(s, req)[0].Kind)
	}
	from := h.c.Now()
	h.c.Advance(from+15, 1) // one firing: timer 2's at +10 waits
	h.rep.sync()
	require.Equal(t, from+10, h.c.wheel.Now())
	h.c.Downtime(from+15, from+50)
	h.c.Advance(from+50, 0)
	h.rep.sync()
	var got []string
	for _, f := range fires(h.take(s)) {
		got = append(got, fmt.Sprintf("t%d@%d#%d", f.Tid, f.Tick-from, f.Fired))
	}
	got = append(got, func() (out []string) {
		for _, f := range h.fastForward(s, 10) {
			out = append(out, fmt.Sprintf("t%d@%d#%d", f.Tid, f.Tick-from, f.Fired))
		}
		return
	}()...)
	assert.Equal(t, []string{"t1@10#1", "t2@10#1", "t1@20#2", "t1@30#3", "t1@40#4", "t1@50#5", "t2@50#2", "t1@60#6", "t2@60#3"}, got)
}
