package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/tickwheel/tickwheel/client"
)

// scheduleFlags are add's flags for calendar schedules and missed-firing
// policies.
type scheduleFlags struct {
	cron, zone, missed *string
	repeatSet          bool // -repeat was given (check)
}

func addScheduleFlags(fs *flag.FlagSet) *scheduleFlags {
	return &scheduleFlags{
		cron:   fs.String("cron", "", `calendar schedule: a cron expression such as "0 4 * * *", or @daily, @hourly, @every 90s (no AFTER)`),
		zone:   fs.String("zone", "", "IANA time zone of -cron, such as Europe/Paris (default UTC); the first firing is printed in it"),
		missed: fs.String("missed", "", "what a repeating timer does with firings that fall in a downtime: all (default), once or skip"),
	}
}

// check checks the positional arguments against the flags: AFTER goes
// with no -cron, -cron with no AFTER, -at with or without AFTER (see
// checkAddTiming), -zone only with -cron.
func (f *scheduleFlags) check(fs *flag.FlagSet, args []string) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case *f.cron != "" && len(args) == 3:
		return usageError{errors.New("add with -cron takes no AFTER: the schedule says when it fires")}
	case *f.cron != "" && (set["at"] || set["every"]):
		return usageError{errors.New("add with -cron takes no -at or -every")}
	case *f.cron == "" && !set["at"] && len(args) == 2:
		return usageError{errors.New("usage: tickwheel add [flags] RECEIVER TID AFTER, or RECEIVER TID -cron EXPR")}
	case *f.cron == "" && *f.zone != "":
		return usageError{errors.New("-zone goes with -cron")}
	}
	f.repeatSet = set["repeat"]
	return nil
}

// apply sets o's schedule, zone and missed-firing policy from the flags.
// Without -repeat, a scheduled timer fires until cancelled.
func (f *scheduleFlags) apply(o *client.AddOptions) error {
	m, err := missedArg(*f.missed)
	if err != nil {
		return err
	}
	o.Missed = m
	if *f.cron != "" {
		o.Schedule, o.Zone = *f.cron, *f.zone
		if !f.repeatSet { // -repeat's default (1) is for AFTER
			o.Repeat = client.Forever
		}
	}
	return nil
}

func missedArg(s string) (client.Missed, error) {
	switch s {
	case "", "all":
		return client.MissedAll, nil
	case "once":
		return client.MissedOnce, nil
	case "skip":
		return client.MissedSkip, nil
	}
	return 0, usageError{fmt.Errorf("-missed %q: want all, once or skip", s)}
}

var missedNames = [...]string{client.MissedAll: "all", client.MissedOnce: "once", client.MissedSkip: "skip"}

// planText is the schedule part of a timer's line: empty for a timer with
// none.
func planText(t client.Timer) string {
	s := ""
	if t.Schedule != "" {
		zone := t.Zone
		if zone == "" {
			zone = "UTC"
		}
		s += fmt.Sprintf("  cron %q %s", t.Schedule, zone)
	}
	if t.Missed != 0 && t.Missed < uint64(len(missedNames)) {
		s += "  missed " + missedNames[t.Missed]
	}
	return s
}

// planJSON adds a timer's schedule fields to m.
func planJSON(t client.Timer, m map[string]any) map[string]any {
	if t.Schedule != "" {
		m["schedule"], m["zone"] = t.Schedule, t.Zone
	}
	if t.Missed != 0 {
		m["missed"] = t.Missed
	}
	return m
}
