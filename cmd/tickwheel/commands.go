package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/protocol"
)

// command is one CLI command: its flags are added to fs, run does the work.
type command struct {
	args     string // positional arguments, for the usage line
	summary  string // what it does, in one line of the usage
	help     string // more for its -h, or ""
	nargs    int    // exact number of positional args, or -1 for "at least one"
	optional int    // of nargs, how many trailing ones may be left out
	flags    func(fs *flag.FlagSet) func(*env) error
}

// env is what a command runs with.
type env struct {
	ctx    context.Context
	c      *client.Client
	args   []string
	json   bool
	stdout io.Writer
	// term is stdout when it is a terminal, else nil: ff draws its
	// progress bar there.
	term io.Writer
	// dial opens another connection to the server, as c was.
	dial func(context.Context) (*client.Client, error)
	// clk prints the server's ticks as times and durations, in the zone
	// of -zone (else the local one, $TZ's if set).
	clk clock
}

var commands = map[string]command{
	"add": {args: "RECEIVER TID AFTER", nargs: 3, optional: 1, flags: addCmd, // AFTER: not with -cron or -at
		summary: "add a timer firing after AFTER (or -at WHEN, or on -cron EXPR)", help: addHelp},
	"cancel": {args: "RECEIVER TID", nargs: 2, optional: 2, flags: cancelCmd, // bulk.go
		summary: "cancel a timer, or every timer of -receiver R or -group G", help: cancelHelp},
	"pause": {args: "RECEIVER TID", nargs: 2, optional: 2, flags: pauseResume(false),
		summary: "pause a timer, or every timer of -receiver R or -group G", help: pauseHelp},
	"resume": {args: "RECEIVER TID", nargs: 2, optional: 2, flags: pauseResume(true),
		summary: "resume a timer, or every timer of -receiver R or -group G", help: resumeHelp},
	"get": {args: "RECEIVER TID", nargs: 2, flags: simple(getCmd), summary: "show a timer"},
	"list": {args: "RECEIVER", nargs: 1, optional: 1, flags: listCmd,
		summary: "show the timers of a receiver in tid order (or of -group G), fetched a page at a time"},
	"watch": {args: "RECEIVER...", nargs: -1, flags: watchCmd,
		summary: "bind receivers and print their events until interrupted", help: watchHelp},
	"time ff": {args: "TICKS|DURATION", nargs: 1, flags: simple(ffCmd), summary: "fast-forward tw-time (admin; was: ff)",
		help: "A number alone is a count of ticks (time ff 100); with a unit it is a duration, days (d)\n" +
			"and weeks (w) included: time ff 1.5s, 90m, 7d, 1w, 1d12h. On a terminal, a fast-forward\n" +
			"that takes over a second shows a progress bar. `tickwheel time freeze` (from another shell)\n" +
			"stops a running one where it is; it then says where it stopped. tw-time may reach at most\n" +
			"2^64-2^62.\n"},
	"time freeze": {nargs: 0, flags: simple(freezeCmd), summary: "stop tw-time following the clock (admin; was: freeze)"},
	"time resume": {nargs: 0, flags: simple(resumeCmd), summary: "make tw-time follow the clock again (admin; was: resume)"},
	"time speed":  {args: "X", nargs: 1, flags: simple(speedCmd), summary: "set the speed of tw-time, e.g. 60 (admin; was: speed)"},
	"stats":       {nargs: 0, flags: simple(statsCmd), summary: "show server statistics (admin)"},
	"ping":        {nargs: 0, flags: simple(pingCmd), summary: "show the server's tw-time"},
	"cluster": {args: "status|add|promote|remove|check ARGS", nargs: -1, flags: clusterFlags,
		summary: "show a cluster's members, add a node (a non-voter until caught up), promote one, remove one, check that the nodes agree (admin)", help: clusterHelp},
}

// scopeHelp is the -h text cancel, pause and resume share; each adds
// what applies to it only.
const scopeHelp = `Give one of: RECEIVER TID (one timer), -receiver R (every timer of receiver R)
or -group G (every timer of group G: see add -group). The server does a large one in
chunks between its other work and answers once it is complete, with the count; it
covers the timers there when it began.
`

const (
	cancelHelp = scopeHelp + "A cancelled timer is gone: it fires no more.\n"
	pauseHelp  = scopeHelp + `pause keeps each timer's remaining ticks (resume gives them back); timers added
to a paused receiver or group start paused until it is resumed.
`
	resumeHelp = scopeHelp + `resume gives each paused timer back the ticks it had left; resume -receiver R or
-group G also ends that receiver's or group's pause, so timers added to it later run.
`
)

func simple(fn func(*env) error) func(*flag.FlagSet) func(*env) error {
	return func(*flag.FlagSet) func(*env) error { return fn }
}

// runCommand runs CLI command name and returns the exit code: 0, 1 for a
// failed request or connection, 2 for bad usage.
func runCommand(name string, args []string, stdout, stderr io.Writer) int {
	name, args, note := resolveCommand(name, args) // bulk.go: time SUB, and the old names
	if note != "" {
		fmt.Fprintln(stderr, note)
	}
	if name == "time" {
		return unknownTime(args, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "tickwheel: unknown command %q\n", name)
		printUsage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("tickwheel "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultAddr(os.Getenv), "server address, or a cluster's nodes separated by commas (the command goes to the leader); $"+envAddr+" when set")
	token := fs.String("token", "", "hello token, admin or client (visible in ps: prefer -token-file or $"+envToken+")")
	tokenFile := fs.String("token-file", "", "file holding the hello token")
	dataDir := fs.String("data-dir", "", "the server's data directory, to read its admin.token (default: the server's default)")
	asJSON := fs.Bool("json", false, "print JSON, one object per line")
	timeout := fs.Duration("timeout", 10*time.Second, "time limit for connecting and each request (but watch and ff, which wait as long as they take)")
	tlsf := addTLSFlags(fs, os.Getenv)
	run := cmd.flags(fs)
	ownZone := fs.Lookup("zone") != nil // add's -zone is its schedule's, and shows the times there too
	if !ownZone {
		fs.String("zone", "", "IANA time zone the times are printed in, such as Europe/Paris (default: the local zone, $TZ's if set)")
	}
	fs.Usage = func() {} // parseArgs prints it
	pos, err := parseArgs(fs, name, cmd, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if errors.As(err, new(usageError)) {
			fmt.Fprintf(stderr, "tickwheel %s: %v\n", name, err)
		}
		return 2
	}
	zone, err := zoneArg(fs.Lookup("zone").Value.String())
	if err != nil && ownZone {
		zone, err = time.Local, nil // the schedule's zone: the server says what is wrong with it
	}
	if err != nil {
		fmt.Fprintf(stderr, "tickwheel %s: %v\n", name, err)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	src := tokenSources{token: *token, tokenFile: *tokenFile, dataDir: *dataDir, dataDirSet: set["data-dir"],
		tokenSet: set["token"], addr: *addr}
	tok, tokFrom, err := cliToken(src, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "tickwheel %s: %s\n", name, errText(err))
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	opts := []client.Option{client.WithToken(tok), client.WithName("tickwheel-cli")}
	if o := tlsf.option(); o != nil {
		opts = append(opts, o)
	}
	if tok != "" && dataDirToken(src, os.Getenv) {
		// A data directory's admin token goes to its own server only, not
		// to the leader a follower names (see cliToken).
		opts = append(opts, client.WithLeaderHops(0))
	}
	dial := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, *addr, append(opts, client.WithReconnect(0, 0))...)
	}
	first := dial
	if name == "watch" { // watch outlives a server restart (watchReconnects)
		first = func(ctx context.Context) (*client.Client, error) {
			return client.Dial(ctx, *addr, append(opts, watchReconnects(stderr))...)
		}
	}
	c, err := first(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "tickwheel %s: %s\n", name, errText(err))
		if tokFrom != "" && errors.Is(err, client.ErrUnauthorized) {
			fmt.Fprintf(stderr, "tickwheel %s: the server at %s refused the admin token in %s: it uses another data directory "+
				"(-data-dir) or token (-token-file, $%s)\n", name, *addr, tokFrom, envToken)
		}
		var e *client.Error
		if errors.As(err, &e) && e.Code == protocol.CodeNotLeader && e.Leader != "" && dataDirToken(src, os.Getenv) {
			fmt.Fprintf(stderr, "tickwheel %s: the data directory's admin token is sent to its own server only: "+
				"give -addr %s with the leader's token (-token-file, $%s)\n", name, e.Leader, envToken)
		}
		return 1
	}
	defer c.Close()
	e := &env{ctx: ctx, c: c, args: pos, json: *asJSON, stdout: stdout, term: terminal(stdout), dial: dial,
		clk: clock{tick: c.TickDuration(), zone: zone}}
	if name == "watch" || name == "time ff" {
		// watch runs until interrupted or -n events; ff until the
		// fast-forward is over, however long it takes (its bar shows how far).
		e.ctx = context.Background()
	}
	if err := run(e); err != nil {
		fmt.Fprintf(stderr, "tickwheel %s: %s\n", name, errText(err))
		if errors.As(err, new(usageError)) {
			return 2
		}
		if hint := noTokenHint(src, os.Getenv); hint != "" && tokFrom == "" && errors.Is(err, client.ErrUnauthorized) {
			fmt.Fprintf(stderr, "tickwheel %s: %s\n", name, hint)
		}
		return 1
	}
	return 0
}

// usageError is a bad argument, reported with exit code 2.
type usageError struct{ error }

// envAddr is the environment variable that sets the commands' default
// server address; -addr beats it.
const envAddr = "TICKWHEEL_ADDR"

// defaultServerAddr is the server's default listen address.
const defaultServerAddr = "127.0.0.1:7420"

// defaultAddr is -addr's default: $TICKWHEEL_ADDR, else the server's
// default address.
func defaultAddr(getenv func(string) string) string {
	if v := getenv(envAddr); v != "" {
		return v
	}
	return defaultServerAddr
}

// zoneArg loads the time zone named by -zone; "" is the local zone.
func zoneArg(name string) (*time.Location, error) {
	if name == "" {
		return time.Local, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("-zone %q: want an IANA time zone such as Europe/Paris, or UTC", name)
	}
	return loc, nil
}

func uintArg(s, what string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, usageError{fmt.Errorf("%s %q: want a non-negative integer", what, s)}
	}
	return v, nil
}

// ticksArg reads a number of ticks (digits only), or a duration (a number
// with a unit, days and weeks included: 1.5s, 90m, 7d, 1w) converted to
// ticks with the server's tick, rounded up.
func (e *env) ticksArg(s, what string) (uint64, error) {
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, nil
	}
	d, err := parseDuration(s)
	if err != nil || d < 0 {
		return 0, usageError{fmt.Errorf("%s %q: want ticks (an integer) or a duration such as 1.5s, 90m, 7d or 1w", what, s)}
	}
	return client.Ticks(d, e.c.TickDuration()), nil
}

func (e *env) key() (receiver, tid uint64, err error) {
	if receiver, err = uintArg(e.args[0], "receiver"); err != nil {
		return
	}
	tid, err = uintArg(e.args[1], "tid")
	return
}

// print writes v as JSON with -json, else the text.
func (e *env) print(v any, text string) {
	if e.json {
		b, _ := json.Marshal(v)
		fmt.Fprintf(e.stdout, "%s\n", b)
		return
	}
	fmt.Fprintln(e.stdout, text)
}

// hasInterval reports whether t repeats on an interval, t.Every: not a
// one-shot, whose Every means nothing, nor a cron timer, whose schedule
// says when it fires.
func hasInterval(t client.Timer) bool { return t.Schedule == "" && t.Repeat != 1 }

func timerJSON(t client.Timer) map[string]any {
	m := map[string]any{"receiver": t.Receiver, "tid": t.Tid, "due": t.Due, "remaining": t.Remaining,
		"fired": t.Fired, "repeat": jsonRepeat(t.Repeat), "paused": t.Paused, "data": string(t.Data)}
	if hasInterval(t) {
		m["every"] = t.Every
	}
	if t.Group != 0 {
		m["group"] = t.Group
	}
	return planJSON(t, m)
}

// timerText is a timer's line: when it is due, in the clock's zone and
// from now, and its interval, in human units.
func (k clock) timerText(t client.Timer) string {
	times := fmt.Sprintf("%d/forever", t.Fired)
	if t.Repeat != client.Forever {
		times = fmt.Sprintf("%d/%d", t.Fired, t.Repeat)
	}
	state := fmt.Sprintf("due %s (in %s)", k.at(t.Due), k.dur(t.Remaining))
	if t.Paused {
		state = fmt.Sprintf("paused with %s left", k.dur(t.Remaining))
	}
	line := fmt.Sprintf("%d/%d  %s", t.Receiver, t.Tid, state)
	if hasInterval(t) {
		line += "  every " + k.dur(t.Every)
	}
	line += "  fired " + times
	line += planText(t)
	if t.Group != 0 {
		line += fmt.Sprintf("  group %d", t.Group)
	}
	if len(t.Data) > 0 {
		line += fmt.Sprintf("  data %q", t.Data)
	}
	return line
}

func getCmd(e *env) error {
	receiver, tid, err := e.key()
	if err != nil {
		return err
	}
	t, err := e.c.Get(e.ctx, receiver, tid)
	if err != nil {
		return err
	}
	e.print(timerJSON(t), e.clk.timerText(t))
	return nil
}

// listReceiver prints the receiver's timers in tid order, each page as it
// comes (see listCmd).
func listReceiver(e *env) error {
	receiver, err := uintArg(e.args[0], "receiver")
	if err != nil {
		return err
	}
	var from uint64
	for n := 0; ; {
		ts, next, err := e.c.ListPage(e.ctx, receiver, from, 0)
		if err != nil {
			return err
		}
		for _, t := range ts {
			e.print(timerJSON(t), e.clk.timerText(t))
		}
		n += len(ts)
		if next == 0 {
			if !e.json && n == 0 {
				fmt.Fprintf(e.stdout, "receiver %d has no timers\n", receiver)
			}
			return nil
		}
		from = next
	}
}

// ffCmd is `time ff TICKS|DURATION`: a positive count of ticks or
// duration (0 or 0s is refused, as argWants says: it would fast-forward
// nothing and fire nothing).
func ffCmd(e *env) error {
	ticks, err := e.ticksArg(e.args[0], "ticks")
	if err != nil {
		return err
	}
	if ticks == 0 {
		return usageError{fmt.Errorf("ticks %q: %s", e.args[0], argWants["TICKS|DURATION"])}
	}
	// tw-time before, to tell a fast-forward that a freeze stopped short
	// (its reply is the tick where it stopped) from one that ran its course.
	from, err := e.c.Ping(e.ctx)
	if err != nil {
		return err
	}
	var bar *ffBar
	if e.term != nil && !e.json {
		bar = startFFBar(e.term, e.dial, ticks, e.clk)
	}
	now, fired, err := e.c.FastForward(e.ctx, ticks)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return err
	}
	if ticks <= math.MaxUint64-from && now < from+ticks {
		e.print(map[string]any{"now": now, "fired": fired, "stopped": true},
			fmt.Sprintf("fast-forward stopped by freeze at %s (tick %d), %s short of %s: %s fired",
				e.clk.at(now), now, e.clk.dur(from+ticks-now), e.clk.at(from+ticks), count(fired, "timer")))
		return nil
	}
	e.print(map[string]any{"now": now, "fired": fired}, fmt.Sprintf("fast-forwarded %s to %s: %s fired", e.clk.dur(ticks), e.clk.at(now), count(fired, "timer")))
	return nil
}

func nowCmd(name string, fn func(context.Context) (uint64, error)) func(*env) error {
	return func(e *env) error {
		now, err := fn(e.ctx)
		if err != nil {
			return err
		}
		e.print(map[string]any{"now": now}, fmt.Sprintf("%s: tw-time is %s (tick %d)", name, e.clk.at(now), now))
		return nil
	}
}

func freezeCmd(e *env) error { return nowCmd("frozen", e.c.Freeze)(e) }
func resumeCmd(e *env) error { return nowCmd("following the clock again", e.c.ResumeSync)(e) }
func pingCmd(e *env) error   { return nowCmd("pong", e.c.Ping)(e) }

func speedCmd(e *env) error {
	x, err := strconv.ParseFloat(strings.TrimSuffix(e.args[0], "x"), 64)
	if err != nil {
		return usageError{fmt.Errorf("speed %q: want a number such as 60", e.args[0])}
	}
	return nowCmd(fmt.Sprintf("speed %gx", x), func(ctx context.Context) (uint64, error) { return e.c.SetSpeed(ctx, x) })(e)
}

func statsCmd(e *env) error {
	s, err := e.c.Stats(e.ctx)
	if err != nil {
		return err
	}
	if e.json {
		e.print(statsJSON(s), "")
		return nil
	}
	fmt.Fprintf(e.stdout, "tw-time     %s (tick %d of %v, target %d, lag %s, speed %gx, frozen %v)\n",
		e.clk.at(s.Now), s.Now, time.Duration(s.TickNs), s.Target, e.clk.dur(s.Lag), s.Speed, s.Frozen)
	fmt.Fprintf(e.stdout, "timers      %d\n", s.Timers)
	fmt.Fprintf(e.stdout, "sessions    %d\n", s.Sessions)
	fmt.Fprintf(e.stdout, "receivers   %d (backlog %s)\n", s.Receivers, count(s.BacklogEvents, "event"))
	if s.OutboxEvents > 0 || s.WaitingFirings > 0 {
		fmt.Fprintf(e.stdout, "outboxes    %s not acknowledged, %s waiting for room\n", count(s.OutboxEvents, "event"), count(s.WaitingFirings, "firing"))
	}
	fmt.Fprintf(e.stdout, "fired       %d (dropped %d)\n", s.FiredTotal, s.DroppedTotal)
	if s.Role != "" {
		fmt.Fprintf(e.stdout, "cluster     %s\n", raftText(s.Role, s.Leader, s.Term, s.CommitIndex, s.AppliedIndex))
		if s.Suffrage != "" { // (servers that predate non-voters send none)
			fmt.Fprintf(e.stdout, "members     %s (this node a %s), %s\n", count(s.Voters, "voter"), s.Suffrage,
				count(s.Nonvoters, "non-voter"))
		}
	}
	return nil
}

// raftText is a cluster node's raft state on one line.
func raftText(role, leader string, term, commit, applied uint64) string {
	if leader == "" {
		leader = "unknown"
	}
	return fmt.Sprintf("%s (leader %s, term %d, commit index %d, applied index %d)", role, leader, term, commit, applied)
}

// repeatArg parses -repeat: a number of firings from 1 to 2^32-2, or
// "forever".
func repeatArg(s string) (uint32, error) {
	if s == "forever" {
		return client.Forever, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 || n == uint64(client.Forever) {
		return 0, usageError{fmt.Errorf(`-repeat %q: want a number of firings from 1 to %d, or "forever"`, s, uint64(client.Forever)-1)}
	}
	return uint32(n), nil
}

// statsJSON is stats -json's object, with docs/PROTOCOL.md's keys.
func statsJSON(s protocol.Stats) any {
	return struct {
		Now            uint64  `json:"now"`
		Target         uint64  `json:"target"`
		Lag            uint64  `json:"lag"`
		Timers         uint64  `json:"timers"`
		Sessions       uint64  `json:"sessions"`
		Connections    uint64  `json:"connections"`
		Receivers      uint64  `json:"receivers"`
		BacklogEvents  uint64  `json:"backlog_events"`
		OutboxEvents   uint64  `json:"outbox_events"`
		WaitingFirings uint64  `json:"waiting_firings"`
		FiredTotal     uint64  `json:"fired_total"`
		DroppedTotal   uint64  `json:"dropped_total"`
		ReceiverBytes  uint64  `json:"receiver_bytes"`
		Retained       uint64  `json:"retained_receivers"`
		TickNs         uint64  `json:"tick_ns"`
		Speed          float64 `json:"speed"`
		Frozen         bool    `json:"frozen"`
		// A cluster node's raft state; absent on a single server.
		Role         string  `json:"role,omitempty"`
		Leader       *string `json:"leader,omitempty"`
		Term         *uint64 `json:"term,omitempty"`
		CommitIndex  *uint64 `json:"commit_index,omitempty"`
		AppliedIndex *uint64 `json:"applied_index,omitempty"`
		Suffrage     string  `json:"suffrage,omitempty"`
		Voters       *uint64 `json:"voters,omitempty"`
		Nonvoters    *uint64 `json:"nonvoters,omitempty"`
	}{s.Now, s.Target, s.Lag, s.Timers, s.Sessions, s.Connections, s.Receivers, s.BacklogEvents, s.OutboxEvents,
		s.WaitingFirings, s.FiredTotal, s.DroppedTotal, s.ReceiverBytes, s.RetainedReceivers, s.TickNs, s.Speed, s.Frozen,
		s.Role, ifCluster(s, &s.Leader), ifCluster(s, &s.Term), ifCluster(s, &s.CommitIndex), ifCluster(s, &s.AppliedIndex),
		s.Suffrage, ifCluster(s, &s.Voters), ifCluster(s, &s.Nonvoters)}
}

// ifCluster is p when s is a cluster node's stats, else nil (the key is
// left out).
func ifCluster[T any](s protocol.Stats, p *T) *T {
	if s.Role == "" {
		return nil
	}
	return p
}

// jsonRepeat is a repeat count as -json prints it: the wire's 0 for
// forever (the client reads forever back as client.Forever).
func jsonRepeat(r uint64) uint64 {
	if r == client.Forever {
		return 0
	}
	return r
}
