package session

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refNext is the trusted reference for calendar.next: a walk over the
// instants minute by minute (every zone tested changes offset on a whole
// minute), using only the time package. Each wall-clock minute the
// expression names fires once, at the first instant whose wall time is at
// or past it: the walk fires at an instant when some named minute lies
// after every wall time already shown and at or before this instant's.
func refNext(t *testing.T, c *calendar, from time.Time) time.Time {
	t.Helper()
	at, ok := refNextWithin(c, from, 5*366*24*time.Hour)
	if !ok {
		t.Fatalf("reference: no firing within 5 years of %v", from)
	}
	return at
}

// refNextWithin is refNext looking no further than limit past from; ok is
// false when it finds no firing there.
func refNextWithin(c *calendar, from time.Time, limit time.Duration) (at time.Time, ok bool) {
	wall := func(i time.Time) time.Time {
		w := i.In(c.loc)
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, time.UTC)
	}
	matches := func(w time.Time) bool {
		s := c.spec
		return 1<<uint(w.Minute())&s.Minute != 0 && 1<<uint(w.Hour())&s.Hour != 0 &&
			1<<uint(w.Month())&s.Month != 0 && dayMatches(s, w)
	}
	// The latest wall time shown up to from, over the two days before.
	maxWall := wall(from)
	for i := from.Add(-48 * time.Hour).Truncate(time.Minute); !i.After(from); i = i.Add(time.Minute) {
		if w := wall(i); w.After(maxWall) {
			maxWall = w
		}
	}
	maxWall = maxWall.Truncate(time.Second)
	for i := from.Truncate(time.Minute).Add(time.Minute); i.Before(from.Add(limit)); i = i.Add(time.Minute) {
		w := wall(i)
		for m := maxWall.Truncate(time.Minute).Add(time.Minute); !m.After(w); m = m.Add(time.Minute) {
			if m.After(maxWall) && matches(m) {
				return i, true
			}
		}
		if w.After(maxWall) {
			maxWall = w
		}
	}
	return time.Time{}, false
}

// The calendar agrees with the reference over a table of expressions,
// zones and DST dates: a run of consecutive firings from just before each
// date.
func TestCalendarMatchesReference(t *testing.T) {
	exprs := []string{"0 4 * * *", "30 2 * * *", "*/15 * * * *", "@hourly", "@daily", "0 18 * * fri",
		"15 1,2,3 * * *", "0 0 1 * *", "45 1 * * sun", "0 */2 * * *", "5 0 13 * 5"}
	zones := []string{"", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"}
	dates := []string{
		"2026-03-08T00:00:00Z", // New York springs forward
		"2026-11-01T00:00:00Z", // New York falls back
		"2026-03-29T00:00:00Z", // Paris springs forward
		"2026-10-25T00:00:00Z", // Paris falls back
		"2026-04-04T12:00:00Z", // Lord Howe falls back 30 minutes (at 02:00 local, April 5)
		"2026-10-03T12:00:00Z", // Lord Howe springs forward 30 minutes (October 4)
	}
	const tickNs = uint64(10 * time.Millisecond)
	for _, zone := range zones {
		for _, expr := range exprs {
			cal, err := parseCalendar(expr, zone, tickNs, nil)
			require.NoError(t, err, expr)
			for _, d := range dates {
				at, _ := time.Parse(time.RFC3339, d)
				tick := uint64(at.UnixNano()) / tickNs
				n := 6
				if !strings.Contains(expr, "*/") && expr != "@hourly" {
					n = 3
				}
				for k := range n {
					want := refNext(t, cal, time.Unix(0, int64(tick*tickNs)))
					got, ok := cal.next(tick, tickNs)
					require.True(t, ok)
					require.Equal(t, want.UTC(), time.Unix(0, int64(got*tickNs)).UTC(),
						"%q in %q from %v (firing %d)", expr, zone, time.Unix(0, int64(tick*tickNs)).In(cal.loc), k)
					tick = got
				}
			}
		}
	}
}

// A leap day: Feb 29 fires every 4 years (and not in 2100).
func TestCalendarLeapDay(t *testing.T) {
	cal, err := parseCalendar("0 0 29 2 *", "Europe/Paris", 1e9, nil)
	require.NoError(t, err)
	var got []int
	tick := uint64(time.Date(2095, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	for range 3 {
		var ok bool
		tick, ok = cal.next(tick, 1e9)
		require.True(t, ok)
		got = append(got, time.Unix(int64(tick), 0).In(cal.loc).Year())
	}
	assert.Equal(t, []int{2096, 2104, 2108}, got)
}

// The DST rules, spelt out: a time in a spring-forward gap fires once at
// the gap's end, a repeated time fires once, at its first occurrence.
func TestCalendarDST(t *testing.T) {
	const tickNs = uint64(time.Millisecond)
	ny, _ := time.LoadLocation("America/New_York")
	at := func(s string) uint64 {
		tm, err := time.ParseInLocation("2006-01-02 15:04 MST", s, ny)
		require.NoError(t, err)
		return uint64(tm.UnixNano()) / tickNs
	}
	fires := func(expr, from string, n int) []string {
		cal, err := parseCalendar(expr, "America/New_York", tickNs, nil)
		require.NoError(t, err)
		var out []string
		tick := at(from)
		for range n {
			var ok bool
			tick, ok = cal.next(tick, tickNs)
			require.True(t, ok)
			out = append(out, time.Unix(0, int64(tick*tickNs)).In(ny).Format("01-02 15:04 MST"))
		}
		return out
	}
	// 2026-03-08: 02:00 EST jumps to 03:00 EDT.
	assert.Equal(t, []string{"03-07 02:30 EST", "03-08 03:00 EDT", "03-09 02:30 EDT"}, fires("30 2 * * *", "2026-03-07 00:00 EST", 3))
	assert.Equal(t, []string{"03-08 01:45 EST", "03-08 03:00 EDT", "03-08 03:15 EDT"}, fires("*/15 * * * *", "2026-03-08 01:30 EST", 3))
	// 2026-11-01: 02:00 EDT falls back to 01:00 EST.
	assert.Equal(t, []string{"11-01 01:30 EDT", "11-02 01:30 EST"}, fires("30 1 * * *", "2026-11-01 00:00 EDT", 2))
	assert.Equal(t, []string{"11-01 01:00 EDT", "11-01 02:00 EST", "11-01 03:00 EST"}, fires("@hourly", "2026-11-01 00:30 EDT", 3))
	// Added during the repeat: the repeated times already shown do not fire again.
	assert.Equal(t, []string{"11-01 02:00 EST"}, fires("*/30 * * * *", "2026-11-01 01:10 EST", 1))
}

// Sunday is 0 or 7, as in classic cron, alone, ending a range, or with a
// step; the timer keeps the expression as written.
func TestCalendarSundaySeven(t *testing.T) {
	from := uint64(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Unix()) // a Monday
	firings := func(expr string) []time.Weekday {
		cal, err := parseCalendar(expr, "Europe/Paris", 1e9, nil)
		require.NoError(t, err, expr)
		assert.Equal(t, expr, cal.expr)
		var days []time.Weekday
		tick := from
		for range 8 {
			var ok bool
			tick, ok = cal.next(tick, 1e9)
			require.True(t, ok)
			days = append(days, time.Unix(int64(tick), 0).In(cal.loc).Weekday())
		}
		return days
	}
	for seven, zero := range map[string]string{
		"0 4 * * 7":     "0 4 * * 0",
		"0 4 * * 5-7":   "0 4 * * 5,6,0",
		"0 4 * * fri-7": "0 4 * * 5,6,0",
		"0 4 * * 1-7/2": "0 4 * * 1,3,5,0",
		"0 4 * * 0-7":   "0 4 * * *",
		"0 4 * * 3,7":   "0 4 * * 3,0",
		"0 4 1 * 7":     "0 4 1 * 0",
		"0 4 * * 6-7/1": "0 4 * * sat,sun",
		"0 4 * * 2-4,7": "0 4 * * 2,3,4,0",
	} {
		assert.Equal(t, firings(zero), firings(seven), seven)
	}
	assert.Contains(t, firings("0 4 * * 7"), time.Sunday)
}

// Bad expressions and zones get errors that name the field or the zone.
func TestCalendarErrors(t *testing.T) {
	cases := []struct{ expr, zone, want string }{
		{"0 25 * * *", "", `schedule "0 25 * * *": field 2 (hour): 25 is above the maximum 23`},
		{"61 * * * *", "", `field 1 (minute): 61 is above the maximum 59`},
		{"* * 0 * *", "", `field 3 (day of month): 0 is below the minimum 1`},
		{"* * * 13 *", "", `field 4 (month): 13 is above the maximum 12`},
		{"* * * * 8", "", `field 5 (day of week): 8 is above the maximum 7`},
		{"* * * * 7-1", "", `field 5 (day of week): range 7-1 starts after it ends`},
		{"* * * foo *", "", `field 4 (month): "foo" is not a number or a name (jan-dec)`},
		{"*/0 * * * *", "", `field 1 (minute): step "0" is not a positive number`},
		{"5-2 * * * *", "", `field 1 (minute): range 5-2 starts after it ends`},
		{"* * * *", "", `4 fields, want 5`},
		{"@sometimes", "", `unrecognized descriptor`},
		{"@every -5s", "", `@every takes a positive duration`},
		{"@every", "", `@every takes a positive duration`},
		{"TZ=UTC 0 4 * * *", "", `give the time zone as the zone argument`},
		{"0 4 * * *", "Mars/Olympus", `zone "Mars/Olympus": not a known IANA time zone`},
		{"0 4 * * *", "Local", `zone "Local"`},
		{strings.Repeat("1", MaxScheduleLen+1), "", "at most"},
	}
	for _, tc := range cases {
		_, err := parseCalendar(tc.expr, tc.zone, 1e7, nil)
		require.Error(t, err, tc.expr)
		assert.Contains(t, err.Error(), tc.want, tc.expr)
	}
	for _, ok := range []string{"0 4 * * *", "0 18 * * FRI", "@daily", "@every 90s", "0,30 9-17/2 1-15 jan-jun mon-fri", "? * * * ?"} {
		_, err := parseCalendar(ok, "Europe/Paris", 1e7, nil)
		assert.NoError(t, err, ok)
	}
}

// @every counts ticks: 90s at 10 ms ticks is 9000 ticks; a duration that
// is not a whole number of ticks rounds up.
func TestCalendarEvery(t *testing.T) {
	cal, err := parseCalendar("@every 90s", "", 1e7, nil)
	require.NoError(t, err)
	n, ok := cal.next(1000, 1e7)
	assert.True(t, ok)
	assert.Equal(t, uint64(10000), n)
	cal, err = parseCalendar("@every 15ms", "", 1e7, nil)
	require.NoError(t, err)
	n, _ = cal.next(0, 1e7)
	assert.Equal(t, uint64(2), n)
}

// Far ends: no next past year 9999 or 2^64-1 ticks, never a crash.
func TestCalendarLimits(t *testing.T) {
	cal, err := parseCalendar("0 0 1 1 *", "Asia/Kolkata", 1e9, nil)
	require.NoError(t, err)
	_, ok := cal.next(lastSecond-10, 1e9)
	assert.False(t, ok)
	_, ok = cal.next(^uint64(0), 1)
	assert.False(t, ok)
	_, ok = cal.next(^uint64(0)-5, 1e9)
	assert.False(t, ok)
	ev, _ := parseCalendar("@every 1s", "", 1e9, nil)
	_, ok = ev.next(^uint64(0), 1e9)
	assert.False(t, ok)
}

// BenchmarkCalendarNext is the cost a cron timer adds to each of its
// firings: computing the next due tick.
func BenchmarkCalendarNext(b *testing.B) {
	for _, tc := range []struct{ expr, zone string }{{"0 4 * * *", "Europe/Paris"}, {"*/15 * * * *", "UTC"}, {"0 18 * * fri", "America/New_York"}} {
		b.Run(tc.expr+" "+tc.zone, func(b *testing.B) {
			cal, err := parseCalendar(tc.expr, tc.zone, 1e7, nil)
			require.NoError(b, err)
			first := uint64(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano() / 1e7)
			end := uint64(time.Date(2036, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano() / 1e7)
			tick := first
			b.ReportAllocs()
			for b.Loop() {
				next, ok := cal.next(tick, 1e7)
				if !ok {
					b.Fatal("no next")
				}
				tick = next
				if tick > end { // ten years of firings, DST changes included, then again
					tick = first
				}
			}
		})
	}
}

// Why next is ours and not robfig's Next: robfig skips a time in a
// spring-forward gap and fires a repeated time twice; the documented rule
// fires each once.
func TestCalendarDiffersFromRobfigOnDST(t *testing.T) {
	const tickNs = uint64(time.Millisecond)
	ny, _ := time.LoadLocation("America/New_York")
	for _, tc := range []struct {
		expr, from string
		robfig     []string
		ours       []string
	}{
		{"30 2 * * *", "2026-03-07 12:00", []string{"03-09 02:30 EDT", "03-10 02:30 EDT"}, []string{"03-08 03:00 EDT", "03-09 02:30 EDT"}},
		{"30 1 * * *", "2026-10-31 12:00", []string{"11-01 01:30 EDT", "11-01 01:30 EST"}, []string{"11-01 01:30 EDT", "11-02 01:30 EST"}},
	} {
		cal, err := parseCalendar(tc.expr, "America/New_York", tickNs, nil)
		require.NoError(t, err)
		spec := *cal.spec
		spec.Location = ny
		at, _ := time.ParseInLocation("2006-01-02 15:04", tc.from, ny)
		tick := uint64(at.UnixNano()) / tickNs
		var robfig, ours []string
		for range 2 {
			at = spec.Next(at)
			robfig = append(robfig, at.In(ny).Format("01-02 15:04 MST"))
			tick, _ = cal.next(tick, tickNs)
			ours = append(ours, time.Unix(0, int64(tick*tickNs)).In(ny).Format("01-02 15:04 MST"))
		}
		assert.Equal(t, tc.robfig, robfig, tc.expr)
		assert.Equal(t, tc.ours, ours, tc.expr)
	}
}

// TestCalendarMemo: next remembers its last answer (a burst of timers
// sharing a calendar asks it with one tick), and the memo never changes an
// answer: asked in any order, with repeats and another tick length, next
// gives what the computation gives.
func TestCalendarMemo(t *testing.T) {
	cal, err := parseCalendar("*/7 3-5 * * mon", "Europe/Paris", 10_000_000, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	ticks := []uint64{start, start, start + 1}
	for range 200 {
		ticks = append(ticks, start+rng.Uint64N(1e9))
	}
	for i, tick := range ticks {
		for _, tickNs := range []uint64{10_000_000, 1_000_000} {
			want, wantOK := cal.compute(tick, tickNs)
			got, ok := cal.next(tick, tickNs)
			require.Equal(t, wantOK, ok, "tick %d (#%d)", tick, i)
			require.Equal(t, want, got, "tick %d (#%d)", tick, i)
			require.Equal(t, calMemo{valid: true, tick: tick, tickNs: tickNs, next: got, ok: ok}, cal.memo)
		}
	}
}
