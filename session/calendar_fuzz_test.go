package session

import (
	"strings"
	"testing"
	"time"
)

// fuzzZones are the zones FuzzCalendar picks from when its zone argument is
// empty: UTC, zones with DST in either hemisphere, a 30-minute DST, a
// half-hour and a 45-minute offset, and a zone that skipped a whole day
// (Apia, 2011-12-30).
var fuzzZones = []string{"", "UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe",
	"Asia/Kolkata", "Asia/Kathmandu", "Pacific/Apia", "America/Sao_Paulo", "Pacific/Chatham"}

// refSince is the first Unix second FuzzCalendar compares with the
// reference from (1980): the reference walks whole minutes, and some zones
// changed offset on odd seconds before then.
const refSince = 315532800

// refWindow is how far FuzzCalendar compares with the reference: the walk
// costs a few milliseconds a day.
const refWindow = 3 * 24 * time.Hour

// FuzzCalendar parses arbitrary expressions and zones and computes firings.
// Whatever the input: parsing and next do not panic; an error says which
// schedule or zone is wrong; next is strictly after the tick it starts
// from and, for a calendar (not @every), does not skip a firing (next from
// the tick just before a firing is that firing); and with whole-second ticks from 1980 on, next agrees
// with refNext (a minute-by-minute walk using only the time package)
// within refWindow. Run it with
// go test -run '^$' -fuzz FuzzCalendar ./session/.
func FuzzCalendar(f *testing.F) {
	for _, s := range []string{"0 4 * * *", "30 2 * * *", "*/15 * * * *", "@hourly", "@daily", "@weekly",
		"@monthly", "@yearly", "0 18 * * fri", "15 1,2,3 * * *", "0 0 29 2 *", "0 0 30 2 *", "5-7 * * * 5-7",
		"1/2 * * * 1-7/2", "? * * * ?", "0,30 9-17/2 1-15 jan-jun mon-fri", "@every 90s", "@every 15ms",
		"@every 1h30m", "TZ=UTC 0 * * * *", "0 0 31 4 *", "59 23 31 12 7"} {
		f.Add(s, "", uint8(2), uint64(1_775_000_000), uint64(1e9))
	}
	f.Add("0 4 * * *", "Asia/Tokyo", uint8(0), uint64(177_500_000_000), uint64(1e7))
	f.Add("30 2 * * *", "America/New_York", uint8(0), uint64(1_772_900_000_000), uint64(1e6))
	f.Add("0 0 * * *", "Pacific/Apia", uint8(0), uint64(1_325_100_000), uint64(1e9))
	f.Add("@every 1s", "", uint8(0), ^uint64(0)-5, uint64(1))
	f.Add("0 0 1 1 *", "Local", uint8(0), uint64(lastSecond-10), uint64(1e9))
	f.Fuzz(func(t *testing.T, expr, zone string, zi uint8, tick, tickNs uint64) {
		if zone == "" {
			zone = fuzzZones[int(zi)%len(fuzzZones)]
		}
		cal, err := parseCalendar(expr, zone, tickNs, newZoneCache())
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "schedule") && !strings.HasPrefix(msg, "zone") {
				t.Fatalf("error %q names neither the schedule nor the zone", msg)
			}
			return
		}
		if n, ok := cal.next(tick, tickNs); ok {
			if n <= tick {
				t.Fatalf("%q in %q: next(%d) = %d, not after it", expr, zone, tick, n)
			}
			// @every counts from the tick it is given; a calendar names
			// instants, and none lies between tick and n.
			if again, ok := cal.next(n-1, tickNs); cal.spec != nil && (!ok || again != n) {
				t.Fatalf("%q in %q: next(%d) = %d but next(%d) = %d, %v", expr, zone, tick, n, n-1, again, ok)
			}
		}
		if cal.spec == nil {
			return
		}
		// Whole-second ticks against the reference.
		sec := refSince + tick%(lastSecond-refSince-uint64(refWindow/time.Second)-86400)
		from := time.Unix(int64(sec), 0)
		want, found := refNextWithin(cal, from, refWindow)
		got, ok := cal.next(sec, 1e9)
		switch {
		case found && (!ok || !time.Unix(int64(got), 0).Equal(want)):
			t.Fatalf("%q in %q from %v: next %v (ok %v), reference %v", expr, zone, from.In(cal.loc),
				time.Unix(int64(got), 0).In(cal.loc), ok, want.In(cal.loc))
		case !found && ok && time.Unix(int64(got), 0).Before(from.Add(refWindow-time.Minute)):
			t.Fatalf("%q in %q from %v: next %v, the reference finds none within %v", expr, zone,
				from.In(cal.loc), time.Unix(int64(got), 0).In(cal.loc), refWindow)
		}
	})
}
