package main

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// clock turns the server's ticks into the times and durations the
// commands print. tw-time is a calendar: tick t is Unix time t × tick
// (docs/ARCHITECTURE.md), tick being the server's tick length from its
// hello reply.
type clock struct {
	tick time.Duration // > 0 once connected
	zone *time.Location
}

// timeLayout is how the commands print a moment: to the millisecond,
// trailing zeros left out ("2026-11-27 04:00:00 CET", "… 04:00:00.01 CET").
const timeLayout = "2006-01-02 15:04:05.999 MST"

// maxUnixSec is the last second of year 9999: a tick past it prints as
// "tick N", not as a date.
const maxUnixSec = 253402300799

// at returns the moment of tick in the clock's zone, "tick N" for one past
// year 9999.
func (k clock) at(tick uint64) string {
	if k.tick <= 0 {
		return fmt.Sprintf("tick %d", tick)
	}
	hi, lo := bits.Mul64(tick, uint64(k.tick))
	if hi >= 1e9 { // the quotient would not fit: far past year 9999
		return fmt.Sprintf("tick %d", tick)
	}
	sec, nsec := bits.Div64(hi, lo, 1e9)
	if sec > maxUnixSec {
		return fmt.Sprintf("tick %d", tick)
	}
	return time.Unix(int64(sec), int64(nsec)).In(k.zone).Format(timeLayout)
}

// dur returns ticks × tick as a human duration (see humanDuration).
func (k clock) dur(ticks uint64) string {
	if k.tick <= 0 {
		return fmt.Sprintf("%d ticks", ticks)
	}
	hi, lo := bits.Mul64(ticks, uint64(k.tick))
	const day = uint64(24 * time.Hour)
	switch {
	case hi >= day: // a tick of a day or more: no server has one
		return fmt.Sprintf("%d ticks", ticks)
	case hi != 0 || lo > math.MaxInt64: // past time.Duration's 292 years
		days, _ := bits.Div64(hi, lo, day)
		return fmt.Sprintf("%dd", days)
	}
	return humanDuration(time.Duration(lo))
}

// humanDuration writes d as precisely as a reader wants it: exact under a
// second ("10ms"), to 10 ms under a minute ("3.52s"), to the second under
// an hour ("12m5s"), to the minute under a day ("3h12m"), then in days and
// hours ("9d4h").
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
		if d < 24*time.Hour {
			return trimZero(fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute))
		}
	}
	d = d.Round(time.Hour)
	return trimZero(fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour))
}

// trimZero drops a zero last unit: "3h0m" is "3h".
func trimZero(s string) string {
	if strings.HasSuffix(s, "h0m") || strings.HasSuffix(s, "d0h") {
		return s[:len(s)-2]
	}
	return s
}

// parseDuration parses a Go duration ("1.5s", "90m", "1h30m") that may
// also count days (d, 24h) and weeks (w, 7d): "7d", "1w", "1d12h",
// "1.5d". A leading sign is allowed (the caller refuses negatives).
func parseDuration(s string) (time.Duration, error) {
	orig := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	if len(s) < len(orig)-1 || s == "" {
		return 0, fmt.Errorf("bad duration %q", orig)
	}
	var days float64 // the d and w parts
	var rest strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		k := j
		for k < len(s) && !(s[k] >= '0' && s[k] <= '9' || s[k] == '.') {
			k++
		}
		if unit := s[j:k]; unit == "d" || unit == "w" {
			f, err := strconv.ParseFloat(s[i:j], 64)
			if err != nil || i == j {
				return 0, fmt.Errorf("bad duration %q", orig)
			}
			if unit == "w" {
				f *= 7
			}
			days += f
		} else {
			rest.WriteString(s[i:k])
		}
		i = k
	}
	var d time.Duration
	if rest.Len() > 0 {
		var err error
		if d, err = time.ParseDuration(rest.String()); err != nil {
			return 0, fmt.Errorf("bad duration %q", orig)
		}
	}
	total := days*float64(24*time.Hour) + float64(d)
	if total >= math.MaxInt64 {
		return 0, fmt.Errorf("duration %q: longer than the longest a duration can be (about 292 years)", orig)
	}
	if neg {
		return -time.Duration(total), nil
	}
	return time.Duration(total), nil
}

// atArg is add's -at: the absolute tick of the first firing, or a
// duration from now. The forms are told apart by their look: digits only
// are a tick number ("1080000"); a value that parses as RFC 3339 is a
// moment ("2026-11-27T04:00:00+01:00", "…Z"), turned into the first tick
// at or after it, so the timer never fires before it; anything else must
// be a duration ("90m", "7d", "1w"; not negative), and the timer fires
// that long after the server reads the request, as AFTER does. A tick or
// moment already passed (-at 0 too) fires at the server's next tick. At
// most one of tick and after is set (neither: -at 0, or a zero duration,
// which are a zero delay).
func (k clock) atArg(s string) (tick uint64, after time.Duration, err error) {
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, 0, nil // 0 is the wire's "no at": AFTER 0, the next tick
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return k.tickOf(s, t)
	}
	d, err := parseDuration(s)
	if err != nil || d < 0 {
		return 0, 0, usageError{fmt.Errorf("-at %q: want a tick number, an RFC 3339 time such as 2026-11-27T04:00:00+01:00, "+
			"or a duration from now such as 90m or 7d", s)}
	}
	return 0, d, nil
}

// tickOf returns the first tick at or after t (s is t as given, for
// errors).
func (k clock) tickOf(s string, t time.Time) (uint64, time.Duration, error) {
	if t.Unix() <= 0 {
		return 0, 0, usageError{fmt.Errorf("-at %s: before 1970, when tw-time starts", s)}
	}
	sec, nsec := uint64(t.Unix()), uint64(t.Nanosecond())
	hi, lo := bits.Mul64(sec, 1e9)
	lo, carry := bits.Add64(lo, nsec, 0)
	hi += carry
	if hi >= uint64(k.tick) {
		return 0, 0, usageError{fmt.Errorf("-at %s: past the last tick", s)}
	}
	q, r := bits.Div64(hi, lo, uint64(k.tick))
	if r != 0 {
		q++
	}
	return q, 0, nil
}
