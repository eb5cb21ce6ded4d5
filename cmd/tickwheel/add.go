package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/tickwheel/tickwheel/client"
)

// The add command: its flags, its checks, and what it prints.

const addHelp = `AFTER is a number of ticks from the current tick (digits only), or a duration
such as 1.5s, 90m, 7d or 1w (d is 24h, w 7d) from the moment the server reads the
request (never early); 0 (or 0s) fires at the next tick. Instead of AFTER (left
out, or 0):
  -at WHEN     the first firing, told apart by its form: digits only are a tick
               number (-at 1080000); an RFC 3339 time with its offset is a moment
               (-at 2026-11-27T04:00:00+01:00, or ...Z), the first tick at or after
               it; anything else is a duration from now, as AFTER (-at 3h, -at 7d).
               A tick or time already passed fires at the next tick, its
               firing late by how far in the past WHEN was
  -cron EXPR   a calendar schedule: a cron expression ("0 4 * * *", "0 18 * * fri")
               or @daily, @hourly, @every 90s, in -zone (default UTC); it fires
               until cancelled unless -repeat N. -zone also prints the first
               firing in that zone
A timer fires once unless -repeat N or -repeat forever; -every sets the interval
between its firings (default AFTER), and is refused on a timer that fires once.
-missed all|once|skip: what a repeating timer does with firings that fall in a
downtime (default all).
`

func addCmd(fs *flag.FlagSet) func(*env) error {
	every := fs.String("every", "", "interval between firings (ticks or a duration); default AFTER")
	repeat := fs.String("repeat", "1", `number of firings, or "forever"`)
	data := fs.String("data", "", "data delivered with every firing")
	replace := fs.Bool("replace", false, "replace an existing timer of the same key")
	at := fs.String("at", "", "first firing (instead of AFTER): a tick number, an RFC 3339 time, or a duration from now (7d)")
	sched := addScheduleFlags(fs) // schedule.go
	group := fs.String("group", "", "put the timer in this group (e.g. a match id), for cancel/pause/resume/list -group; 0 (the default) is no group")
	return func(e *env) error {
		receiver, tid, err := e.key()
		if err != nil {
			return err
		}
		g, err := groupArg(*group, true)
		if err != nil {
			return err
		}
		if err := sched.check(fs, e.args); err != nil {
			return err
		}
		// AFTER in ticks counts from the current tick; as a duration it
		// counts from the moment the server reads the request, so the
		// timer never fires early (client.AddAfter).
		var after uint64
		var d time.Duration // AFTER or -at as a duration, else 0
		if len(e.args) == 3 {
			var afterErr error
			if after, afterErr = strconv.ParseUint(e.args[2], 10, 64); afterErr != nil {
				var err error
				if d, err = parseDuration(e.args[2]); err != nil || d < 0 {
					return usageError{fmt.Errorf("after %q: want ticks (an integer) or a duration such as 1.5s or 7d (0: at the next tick)", e.args[2])}
				}
			}
		}
		var atTick uint64
		if *at != "" {
			if atTick, d, err = e.clk.atArg(*at); err != nil { // d: a duration from now, as AFTER
				return err
			}
		}
		n, err := repeatArg(*repeat)
		if err != nil {
			return err
		}
		if err := checkAddTiming(fs, e.args, n); err != nil {
			return err
		}
		o := &client.AddOptions{Repeat: n, Data: []byte(*data), Replace: *replace, Group: g}
		if *every != "" {
			if o.Every, err = e.ticksArg(*every, "every"); err != nil {
				return err
			}
			if o.Every == 0 {
				return usageError{fmt.Errorf("-every %q: want a positive interval (leave -every out for AFTER's)", *every)}
			}
		}
		if err := sched.apply(o); err != nil {
			return err
		}
		var due uint64
		switch {
		case o.Schedule != "":
			due, err = e.c.AddSchedule(e.ctx, receiver, tid, o.Schedule, o)
		case atTick != 0:
			due, err = e.c.AddAt(e.ctx, receiver, tid, atTick, o)
		case d > 0:
			due, err = e.c.AddAfter(e.ctx, receiver, tid, d, o)
		default:
			due, err = e.c.Add(e.ctx, receiver, tid, after, o)
		}
		if err != nil {
			return err
		}
		e.printAdded(receiver, tid, due)
		return nil
	}
}

// printAdded prints what add did. The add reply carries only due, "as if
// it ran" (docs/PROTOCOL.md, add): a timer added to a paused receiver or
// group starts paused, which the reply does not say. So add asks for the
// timer (a get, one more request on the connection, which the server
// answers at once) and prints its state from that: "paused with 20ms
// left" when it is paused, else its first firing as the reply says. A get
// that finds no timer (it fired, or was cancelled, in between) leaves the
// reply's first firing, which was true; one that fails otherwise does not
// fail the add, which is done: the first firing is then printed with
// "unless its receiver or group is paused". -json adds "paused": true
// and "remaining" to its object only for a timer that starts paused.
func (e *env) printAdded(receiver, tid, due uint64) {
	v := map[string]any{"receiver": receiver, "tid": tid, "due": due}
	first := fmt.Sprintf("added %d/%d: first firing %s (tick %d)", receiver, tid, e.clk.at(due), due)
	t, err := e.c.Get(e.ctx, receiver, tid)
	switch {
	case err == nil && t.Paused:
		v["paused"], v["remaining"] = true, t.Remaining
		where := fmt.Sprintf("receiver %d", receiver)
		if t.Group != 0 {
			where += fmt.Sprintf(" or group %d", t.Group)
		}
		e.print(v, fmt.Sprintf("added %d/%d: paused with %s left (its %s is paused): it runs once resumed",
			receiver, tid, e.clk.dur(t.Remaining), where))
	case err == nil, errors.Is(err, client.ErrNotFound):
		e.print(v, first)
	default:
		e.print(v, first+", unless its receiver or group is paused")
	}
}

// checkAddTiming refuses AFTER (but 0) together with -at, and -every on a
// timer that fires once, where it would have no effect: a user who gives
// -every wants repeats, and a timer silently firing once is worse than no
// timer. Cron timers are checked by scheduleFlags.check.
func checkAddTiming(fs *flag.FlagSet, args []string, repeat uint32) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["cron"] && fs.Lookup("cron").Value.String() != "" {
		return nil // a schedule: AFTER, -at and -every mean nothing (the schedule flags check)
	}
	if set["at"] && fs.Lookup("at").Value.String() == "" {
		return usageError{errors.New("-at \"\": give the first firing: a tick number, an RFC 3339 time or a duration from now")}
	}
	if set["at"] && len(args) == 3 && args[2] != "0" {
		return usageError{fmt.Errorf("AFTER %s and -at %s: give one (-at is the first firing)",
			args[2], fs.Lookup("at").Value)}
	}
	if set["every"] && repeat == 1 {
		return usageError{errors.New("-every has no effect on a timer that fires once: add -repeat N (N > 1) or -repeat forever")}
	}
	return nil
}
