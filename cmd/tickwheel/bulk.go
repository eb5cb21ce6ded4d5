package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tickwheel/tickwheel/client"
)

// The commands on many timers at once (issue 27): cancel, pause and
// resume of a timer, of every timer of a receiver (-receiver R) or of a
// group (-group G), and list -group G; and the tw-time commands under
// `time` (time freeze|resume|speed|ff), whose old names stay aliases for
// one release.

// timeSubs are the sub-commands of `time`: the commands map holds them as
// "time freeze", ...
var timeSubs = []string{"freeze", "resume", "speed", "ff"}

// resolveCommand maps the command line's name and arguments to a command
// of the commands map: `time SUB` to "time SUB", and the tw-time
// commands' old names (freeze, speed, ff, and resume without a timer,
// -receiver or -group) to the new ones, with a note for stderr. An
// unknown `time` sub-command is left as "time", which is no command.
func resolveCommand(name string, args []string) (string, []string, string) {
	isSub := func(s string) bool {
		for _, sub := range timeSubs {
			if s == sub {
				return true
			}
		}
		return false
	}
	switch {
	case name == "time":
		if i := firstPositional(args); i >= 0 && isSub(args[i]) {
			return "time " + args[i], append(args[:i:i], args[i+1:]...), ""
		}
	case name == "freeze" || name == "speed" || name == "ff" || name == "resume" && !timerResume(args):
		return "time " + name, args, fmt.Sprintf("tickwheel %s: now `tickwheel time %s`; the old name goes in the next release", name, name)
	}
	return name, args, ""
}

// firstPositional returns the index of the first positional argument in
// args, skipping flags and the values of those that take one, or -1.
func firstPositional(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) == 0 || a[0] != '-' || isNumber(a) {
			return i
		}
		if f := strings.TrimLeft(a, "-"); !strings.Contains(f, "=") && f != "json" && f != "h" && f != "help" {
			i++ // the flag's value
		}
	}
	return -1
}

// timerResume reports whether resume's arguments name a timer, a receiver
// or a group (else it is the old name of `time resume`).
func timerResume(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) == 0 || a[0] != '-' || isNumber(a) {
			return true // a positional argument: RECEIVER TID
		}
		f := strings.TrimLeft(a, "-")
		f, _, _ = strings.Cut(f, "=")
		if f == "receiver" || f == "group" || f == "h" || f == "help" {
			return true // -h: the help of the command named resume, not of its old alias
		}
		if !strings.Contains(a, "=") && f != "json" && i+1 < len(args) {
			i++ // a common flag's value
		}
	}
	return false
}

// unknownTime answers `time` without a known sub-command: `time -h` (or
// help) with its usage, the four sub-commands, on stdout (exit 0); a bare
// `time` with that usage on stderr, and an unknown sub-command with what
// it wants (exit 2).
func unknownTime(args []string, stdout, stderr io.Writer) int {
	i := firstPositional(args)
	for _, a := range args {
		if isHelp(a) && (i < 0 || args[i] == a) {
			timeUsage(stdout)
			return 0
		}
	}
	if i >= 0 {
		fmt.Fprintf(stderr, "tickwheel time: want freeze, resume, speed or ff, got %q\n", args[i])
		return 2
	}
	timeUsage(stderr)
	return 2
}

// timeUsage writes the usage of `time`: its sub-commands, one line each.
func timeUsage(w io.Writer) {
	fmt.Fprint(w, "usage: tickwheel time SUBCOMMAND [flags] ARGS...\n\nthe server's tw-time (admin):\n")
	for _, sub := range timeSubs {
		cmd := commands["time "+sub]
		fmt.Fprintf(w, "  %-23s  %s\n", strings.TrimSpace("time "+sub+" "+cmd.args), cmd.summary)
	}
	fmt.Fprint(w, "\ntickwheel time SUBCOMMAND -h: a sub-command's arguments and flags\n")
}

// scope is the -receiver and -group flags of cancel, pause, resume and
// list: what a command acts on besides one timer.
type scope struct{ receiver, group *string }

func scopeFlags(fs *flag.FlagSet, what string) scope {
	return scope{
		receiver: fs.String("receiver", "", what+" every timer of this receiver (instead of RECEIVER TID)"),
		group:    fs.String("group", "", what+" every timer of this group (instead of RECEIVER TID)"),
	}
}

// groupArg reads the value s of the -group flag of add, cancel, pause,
// resume and list, a string in each, so that a bad one is refused in the
// same words everywhere ("tickwheel add: -group \"-1\": want a
// non-negative integer"), not in the flag package's. Group 0 is no group:
// add takes it (and "", not given) as a timer in none; the others, which
// act on a group, refuse it (zeroOK false).
func groupArg(s string, zeroOK bool) (uint64, error) {
	if s == "" && zeroOK {
		return 0, nil
	}
	g, err := uintArg(s, "-group")
	if err == nil && g == 0 && !zeroOK {
		return 0, usageError{errors.New("-group 0: group 0 is no group")}
	}
	return g, err
}

// pick returns which of RECEIVER TID (args), -receiver or -group the
// command was given, refusing none or more than one: "timer", "receiver"
// or "group", with the id.
func (sc scope) pick(args []string, cmd string) (kind string, id uint64, err error) {
	n := 0
	if len(args) > 0 {
		kind, n = "timer", n+1
	}
	if *sc.receiver != "" {
		kind, n = "receiver", n+1
		if id, err = uintArg(*sc.receiver, "-receiver"); err != nil {
			return
		}
	}
	if *sc.group != "" {
		kind, n = "group", n+1
		if id, err = groupArg(*sc.group, false); err != nil {
			return
		}
	}
	switch {
	case n != 1:
		return "", 0, usageError{fmt.Errorf("give one of RECEIVER TID, -receiver R or -group G (usage: tickwheel %s -h)", cmd)}
	case kind == "timer" && len(args) != 2:
		return "", 0, usageError{fmt.Errorf("give RECEIVER and TID (usage: tickwheel %s -h)", cmd)}
	}
	return kind, id, nil
}

func cancelCmd(fs *flag.FlagSet) func(*env) error {
	sc := scopeFlags(fs, "cancel")
	return func(e *env) error {
		kind, id, err := sc.pick(e.args, "cancel")
		if err != nil {
			return err
		}
		var n int
		switch kind {
		case "timer":
			receiver, tid, err := e.key()
			if err != nil {
				return err
			}
			if err := e.c.Cancel(e.ctx, receiver, tid); err != nil {
				return err
			}
			e.print(map[string]any{"receiver": receiver, "tid": tid, "cancelled": true}, fmt.Sprintf("cancelled %d/%d", receiver, tid))
			return nil
		case "receiver":
			n, err = e.c.CancelAll(e.ctx, id)
		default:
			n, err = e.c.CancelGroup(e.ctx, id)
		}
		if err != nil {
			return err
		}
		e.print(map[string]any{kind: id, "cancelled": n}, fmt.Sprintf("cancelled %s of %s %d", count(uint64(n), "timer"), kind, id))
		return nil
	}
}

// pauseResume is pause (resume false) or resume of a timer, a receiver's
// timers or a group's.
func pauseResume(resume bool) func(*flag.FlagSet) func(*env) error {
	verb, done := "pause", "paused"
	if resume {
		verb, done = "resume", "resumed"
	}
	return func(fs *flag.FlagSet) func(*env) error {
		sc := scopeFlags(fs, verb)
		return func(e *env) error {
			kind, id, err := sc.pick(e.args, verb)
			if err != nil {
				return err
			}
			var n int
			switch {
			case kind == "timer":
				receiver, tid, err := e.key()
				if err != nil {
					return err
				}
				if resume {
					err = e.c.Resume(e.ctx, receiver, tid)
				} else {
					err = e.c.Pause(e.ctx, receiver, tid)
				}
				if err != nil {
					return err
				}
				e.print(map[string]any{"receiver": receiver, "tid": tid, done: true}, fmt.Sprintf("%s %d/%d", done, receiver, tid))
				return nil
			case kind == "receiver" && resume:
				n, err = e.c.ResumeAll(e.ctx, id)
			case kind == "receiver":
				n, err = e.c.PauseAll(e.ctx, id)
			case resume:
				n, err = e.c.ResumeGroup(e.ctx, id)
			default:
				n, err = e.c.PauseGroup(e.ctx, id)
			}
			if err != nil {
				return err
			}
			text := fmt.Sprintf("%s %s of %s %d", done, count(uint64(n), "timer"), kind, id)
			if !resume {
				text += fmt.Sprintf("; timers added to it start paused until `tickwheel resume -%s %d`", kind, id)
			}
			e.print(map[string]any{kind: id, done: n}, text)
			return nil
		}
	}
}

// listCmd prints the receiver's timers in tid order, or with -group G the
// group's in (receiver, tid) order, each page as it comes (the server
// bounds a page by max_list_page and max_list_bytes), so a receiver or
// group with many timers is never held whole.
func listCmd(fs *flag.FlagSet) func(*env) error {
	group := fs.String("group", "", "list the timers of this group instead of a receiver's, in (receiver, tid) order")
	return func(e *env) error {
		if *group == "" {
			if len(e.args) != 1 {
				return usageError{errors.New("give RECEIVER, or -group G")}
			}
			return listReceiver(e)
		}
		if len(e.args) != 0 {
			return usageError{errors.New("give RECEIVER or -group G, not both")}
		}
		g, err := groupArg(*group, false)
		if err != nil {
			return err
		}
		var from client.GroupCursor
		for n := 0; ; {
			ts, next, err := e.c.ListGroupPage(e.ctx, g, from, 0)
			if err != nil {
				return err
			}
			for _, t := range ts {
				e.print(timerJSON(t), e.clk.timerText(t))
			}
			n += len(ts)
			if next == (client.GroupCursor{}) {
				if !e.json && n == 0 {
					fmt.Fprintf(e.stdout, "group %d has no timers\n", g)
				}
				return nil
			}
			from = next
		}
	}
}
