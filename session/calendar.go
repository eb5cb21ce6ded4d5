package session

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zone rules for machines without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// Calendar schedules (issue 15, part 3). A timer with a schedule fires at
// the times a cron expression names, on tw-time's calendar: tick t is the
// instant t × TickNs nanoseconds after the Unix epoch, read as wall-clock
// time in the schedule's zone. Its next due tick is a pure function of the
// expression, the zone and the tick it was last due at (calendar.next), so
// a replay and a restored snapshot compute the same ticks.
//
// DST, the rule next implements: each wall-clock minute the expression
// names fires at most once, at the first instant whose wall-clock time is
// at or past it. So a time that does not exist (inside a spring-forward
// gap) fires once, at the instant the gap ends (02:30 on a day New York
// skips from 02:00 to 03:00 fires at 03:00 EDT; several such times fire
// once between them), and a time that occurs twice (a fall-back repeat)
// fires once, at its first occurrence. @every is not wall-clock time: it
// is a fixed number of ticks.

// Bounds on a schedule's text, so a timer with both still fits the one
// timer a list page must hold (limits.max_list_bytes >= max_data + 256).
const (
	MaxScheduleLen = 100 // bytes of a cron expression
	MaxZoneLen     = 64  // bytes of a zone name
)

// searchDays bounds how far ahead next looks for a matching day: more than
// the longest gap between two matches of any expression (Feb 29 on a
// given weekday-or-date combination repeats within 8 years; 2100 is not a
// leap year).
const searchDays = 366 * 9

// lastSecond is the last Unix second next computes with (9999-12-31
// 23:59:59 UTC): a schedule past it has no next firing.
const lastSecond = 253402300799

// calendar is a parsed schedule.
type calendar struct {
	expr string
	zone string
	loc  *time.Location
	spec *cron.SpecSchedule // nil for @every
	// every is @every's interval in ticks (the duration rounded up to
	// whole ticks).
	every uint64
	// memo is the last answer of next: the timers sharing this calendar
	// that are due on one tick ask next with the same tick, and a burst of
	// them (1M timers on "* * * * *") then costs one computation. It is a
	// cache of a pure function, so it changes no result. Owned by the
	// event loop, as the Core that shares the calendar is.
	memo calMemo
}

// calMemo is one answer of calendar.next: for tick and tickNs, next and ok.
type calMemo struct {
	valid        bool
	tick, tickNs uint64
	next         uint64
	ok           bool
}

// cronParser reads 5 fields plus descriptors (@daily, @hourly, ...).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// fieldSpec describes one of the 5 fields, for errors that name it.
type fieldSpec struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i (months, weekdays)
}

var cronFields = [5]fieldSpec{
	{"minute", 0, 59, nil},
	{"hour", 0, 23, nil},
	{"day of month", 1, 31, nil},
	{"month", 1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{"day of week", 0, 7, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}, // 7 is Sunday too
}

// sundaySeven rewrites a checked 5-field expression's day of week for
// robfig's parser, which knows Sunday only as 0: classic cron's 7 (or 07)
// becomes 0, and a range reaching 7 (5-7, 1-7/2) becomes the list of its
// days with 7 as 0. A start with a step and no end (1/2) keeps robfig's
// meaning, up to Saturday. The timer keeps the expression as given.
func sundaySeven(expr string) string {
	fields := strings.Fields(expr)
	parts := strings.Split(fields[4], ",")
	changed := false
	for i, part := range parts {
		rng, step, _ := strings.Cut(part, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		end := lo
		if isRange {
			end = hi
		}
		if v, err := cronFields[4].value(end); rng != "*" && rng != "?" && err == nil && v == 7 {
			a, _ := cronFields[4].value(lo) // checked: a number or a name
			by := 1
			if step != "" {
				by, _ = strconv.Atoi(step)
			}
			var days []string
			for d := a; d <= 7; d += by {
				days = append(days, strconv.Itoa(d%7))
			}
			parts[i], changed = strings.Join(days, ","), true
		}
	}
	if !changed {
		return expr
	}
	fields[4] = strings.Join(parts, ",")
	return strings.Join(fields, " ")
}

// parseCalendar parses expr in zone ("" = UTC) for a tick of tickNs
// nanoseconds. Its errors say what is wrong and where: the field and its
// number, or the zone. zones caches loaded locations (by name).
func parseCalendar(expr, zone string, tickNs uint64, zones *zoneCache) (*calendar, error) {
	switch {
	case len(expr) > MaxScheduleLen:
		return nil, fmt.Errorf("schedule of %d bytes: at most %d", len(expr), MaxScheduleLen)
	case len(zone) > MaxZoneLen:
		return nil, fmt.Errorf("zone of %d bytes: at most %d", len(zone), MaxZoneLen)
	case tickNs == 0:
		return nil, fmt.Errorf("schedule %q: the tick length is unknown", expr)
	}
	loc, err := loadZone(zone, zones)
	if err != nil {
		return nil, err
	}
	cal := &calendar{expr: expr, zone: zone, loc: loc}
	trimmed := strings.TrimSpace(expr)
	if rest, ok := strings.CutPrefix(trimmed, "@every"); ok {
		// Not robfig's: its Every rounds the duration down to whole
		// seconds, silently changing what the user asked for.
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d <= 0 || rest == "" || rest[0] != ' ' {
			return nil, fmt.Errorf("schedule %q: @every takes a positive duration such as 90s or 1h30m", expr)
		}
		cal.every = (uint64(d) + tickNs - 1) / tickNs
		return cal, nil
	}
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q: give the time zone as the zone argument, not in the expression", expr)
	}
	if !strings.HasPrefix(trimmed, "@") {
		if err := checkFields(expr); err != nil {
			return nil, err
		}
		trimmed = sundaySeven(trimmed)
	}
	s, err := cronParser.Parse(trimmed)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %v", expr, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("schedule %q: not a calendar schedule", expr)
	}
	cal.spec = spec
	return cal, nil
}

// loadZone loads the IANA zone name ("" = UTC) through zones (nil: no
// cache; see zoneCache).
func loadZone(name string, zones *zoneCache) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	return zones.get(name)
}

// checkFields checks a 5-field expression field by field, so that an
// error names the field (robfig's do not).
func checkFields(expr string) error {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return fmt.Errorf("schedule %q: %d fields, want 5 (minute hour day-of-month month day-of-week) or a descriptor such as @daily", expr, len(fields))
	}
	for i, f := range fields {
		if err := checkField(f, &cronFields[i]); err != nil {
			return fmt.Errorf("schedule %q: field %d (%s): %v", expr, i+1, cronFields[i].name, err)
		}
	}
	return nil
}

// checkField checks one field: a comma-separated list of *, ?, N, N-M,
// each optionally /step.
func checkField(f string, fs *fieldSpec) error {
	for part := range strings.SplitSeq(f, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n <= 0 {
				return fmt.Errorf("step %q is not a positive number", step)
			}
		}
		if rng == "*" || rng == "?" {
			continue
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		a, err := fs.value(lo)
		if err != nil {
			return err
		}
		b := a
		if isRange {
			if b, err = fs.value(hi); err != nil {
				return err
			}
			if a > b {
				return fmt.Errorf("range %s starts after it ends", rng)
			}
		}
	}
	return nil
}

// value reads one value of the field: a number or (months, weekdays) a
// three-letter name.
func (fs *fieldSpec) value(s string) (int, error) {
	for i, n := range fs.names {
		if strings.EqualFold(s, n) {
			return fs.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	switch {
	case s == "":
		return 0, fmt.Errorf("a value is missing")
	case err != nil:
		if fs.names != nil {
			return 0, fmt.Errorf("%q is not a number or a name (%s-%s)", s, fs.names[0], fs.names[len(fs.names)-1])
		}
		return 0, fmt.Errorf("%q is not a number", s)
	case v < fs.min:
		return 0, fmt.Errorf("%d is below the minimum %d", v, fs.min)
	case v > fs.max:
		return 0, fmt.Errorf("%d is above the maximum %d", v, fs.max)
	}
	return v, nil
}

// next returns the first tick after tick at which the schedule fires, for
// a tick of tickNs nanoseconds; ok is false when there is none (past year
// 9999, or past 2^64-1 ticks).
func (c *calendar) next(tick, tickNs uint64) (uint64, bool) {
	if m := &c.memo; m.valid && m.tick == tick && m.tickNs == tickNs {
		return m.next, m.ok
	}
	next, ok := c.compute(tick, tickNs)
	c.memo = calMemo{valid: true, tick: tick, tickNs: tickNs, next: next, ok: ok}
	return next, ok
}

// compute is next without the memo.
func (c *calendar) compute(tick, tickNs uint64) (uint64, bool) {
	if c.spec == nil {
		if c.every > math.MaxUint64-tick {
			return 0, false
		}
		return tick + c.every, true
	}
	hi, lo := bits.Mul64(tick, tickNs)
	if hi >= 1e9 {
		return 0, false
	}
	sec, nsec := bits.Div64(hi, lo, 1e9)
	if sec > lastSecond {
		return 0, false
	}
	_ = nsec // the walls compared are whole seconds (see maxWall)
	l, ok := c.nextWall(c.maxWall(int64(sec)) + 1)
	if !ok {
		return 0, false
	}
	at := c.firstAtOrPast(l)
	if at <= 0 || at > lastSecond {
		return 0, false
	}
	// ceil(at × 1e9 / tickNs): the first tick boundary at or after it.
	h, l2 := bits.Mul64(uint64(at), 1e9)
	if h >= tickNs {
		return 0, false
	}
	q, r := bits.Div64(h, l2, tickNs)
	if r != 0 {
		if q == math.MaxUint64 {
			return 0, false
		}
		q++
	}
	return q, q > tick
}

// Wall-clock times are seconds counted as if the zone were UTC (a
// "local Unix time"); instants are Unix seconds.

// wallOf returns the wall-clock time of instant sec.
func (c *calendar) wallOf(sec int64) int64 {
	_, off := time.Unix(sec, 0).In(c.loc).Zone()
	return sec + int64(off)
}

// maxWall returns the latest wall-clock second shown at or before instant
// sec (a fall-back makes it later than sec's own): every wall time up to
// it has had its instant, and must not fire again. The instants just
// before the zone changes of the last two days (more than any offset
// difference) are the only other candidates.
func (c *calendar) maxWall(sec int64) int64 {
	m := c.wallOf(sec)
	t := time.Unix(sec, 0).In(c.loc)
	for range 8 {
		start, _ := t.ZoneBounds()
		if start.IsZero() || start.Unix() < sec-2*86400 {
			break
		}
		before := start.Unix() - 1
		m = max(m, c.wallOf(before))
		t = time.Unix(before, 0).In(c.loc)
	}
	return m
}

// firstAtOrPast returns the first instant whose wall-clock time is at or
// past wall l: the instant l has (its first, when it has two), or the end
// of the gap it falls in.
func (c *calendar) firstAtOrPast(l int64) int64 {
	// Offsets lie within ±26h of each other; from 30h before, every
	// instant shows a wall time before l.
	cur := l - 30*3600
	for range 16 {
		t := time.Unix(cur, 0).In(c.loc)
		_, off := t.Zone()
		_, end := t.ZoneBounds()
		at := max(l-int64(off), cur)
		if end.IsZero() || at < end.Unix() {
			return at
		}
		cur = end.Unix()
	}
	return l // not reached with real zone data
}

// nextWall returns the first wall-clock time at or after from (a whole
// second) that the expression names, searching searchDays days.
func (c *calendar) nextWall(from int64) (int64, bool) {
	s := c.spec
	day := from - mod(from, 86400)
	for range searchDays {
		t := time.Unix(day, 0).UTC()
		if 1<<uint(t.Month())&s.Month != 0 && dayMatches(s, t) {
			for h := int64(0); h < 24; h++ {
				if 1<<uint(h)&s.Hour == 0 || day+h*3600+3599 < from {
					continue
				}
				for m := int64(0); m < 60; m++ {
					if l := day + h*3600 + m*60; 1<<uint(m)&s.Minute != 0 && l >= from {
						return l, true
					}
				}
			}
		}
		day += 86400
	}
	return 0, false
}

// dayMatches is robfig's rule: with * in the day of month or the day of
// week, both must match; otherwise either.
func dayMatches(s *cron.SpecSchedule, t time.Time) bool {
	const star = 1 << 63
	dom := 1<<uint(t.Day())&s.Dom != 0
	dow := 1<<uint(t.Weekday())&s.Dow != 0
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}
