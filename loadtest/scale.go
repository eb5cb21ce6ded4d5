package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ScaleParams configure Scale.
type ScaleParams struct {
	Bin        string   // the tickwheel binary
	ServerCPUs string   // the CPU list it is pinned to ("" = not pinned)
	Token      string   // its admin token (given to it in $TICKWHEEL_ADMIN_TOKEN)
	Args       []string // extra server flags
	Dir        string   // the data directory (empty, made by the caller)
	// N timers without data, due 1 hour to 1 week away (none fires in the
	// run), not ephemeral, over Receivers receivers (1000–100k), added
	// over Conns connections Batch timers per worker at a time (the
	// generator holds Conns × Batch timers, not N).
	N, Receivers, Conns, Batch int
	// SnapshotInterval is the server's snapshot.min_interval, with
	// snapshot.every_records 10: a snapshot every SnapshotInterval while
	// timers are added and while they fire (back to back when it is 0).
	SnapshotInterval time.Duration
	// SnapshotNice is the server's snapshot.nice (0: not set);
	// SnapshotPriority its snapshot.priority ("": not set).
	SnapshotNice     int
	SnapshotPriority string
	// Alternate, when set, are snapshot.priority values: after the firing
	// plan, Rounds times, for each of them in turn, the plan again with
	// snapshots at that priority and then with none being written, on
	// the same server (SIGHUP between; scale_alt.go).
	Alternate []string
	Rounds    int
	// QuietBelow, when over 0, holds each of those plans until the other
	// processes' CPU (otherCPU) over 2 s is under it, in cores, for up
	// to QuietWait; a plan that ran without that is marked.
	QuietBelow float64
	QuietWait  time.Duration
	// Rate fires per second for Duration, each timer added Lead before its
	// due (the lateness scenario), while the N timers are held.
	Rate     int
	Duration time.Duration
	Lead     time.Duration
	// RedisAddr, when set, is a Redis server the same N timers (RedisN
	// when > 0) are added to as ZSET members after the tickwheel part,
	// for its used_memory per member.
	RedisAddr string
	RedisN    int
	// Quiet, after the firing plan: snapshots turned off (SIGHUP), the
	// same plan again with none being written, the loop's turns while
	// stats, /metrics, the status page and a list page are asked for, and
	// the idle CPU over IdleFor (scale_quiet.go). HTTPAddr is the
	// server's operator listener, given to it by Scale (Args).
	Quiet    bool
	IdleFor  time.Duration
	HTTPAddr string
	Log      io.Writer // the servers' logs are also copied here (nil: kept only)
	Logf     func(string, ...any)
}

// scaleBase is the first of the scale timers' receivers: no other
// scenario's (receiverOf stays below 1<<40).
const scaleBase = 1 << 40

// Scale drives a durable server (fsync everysec) to N live timers and
// measures what holding them costs: it adds them (adds/s over the first
// million and over the whole run), reads the server's RSS, runs a plan of
// Rate fires/s over them (fire lateness percentiles), waits for a
// snapshot holding all N timers (its bytes per timer), kills the server
// with SIGKILL and times the restart from exec to accepting connections
// (the log's "state recovered" line: timers, records and firings
// replayed). Every "loop_pause=" line of the server's log (a snapshot's
// copy) is reported by phase: while adding, while firing, other. With
// RedisAddr it then adds the timers to Redis as one sorted set and
// reports used_memory per member.
func Scale(ctx context.Context, p ScaleParams) (*ScaleReport, error) {
	if p.Logf == nil {
		p.Logf = func(string, ...any) {}
	}
	if p.N <= 0 || p.Receivers <= 0 || p.Conns <= 0 || p.Batch <= 0 {
		return nil, fmt.Errorf("scale: N, Receivers, Conns and Batch must be positive")
	}
	rep := &ScaleReport{N: p.N, Receivers: p.Receivers, Rate: p.Rate, Duration: p.Duration, SnapshotInterval: p.SnapshotInterval}
	conf, err := p.writeConfig()
	if err != nil {
		return nil, err
	}
	defer os.Remove(conf)
	args := append([]string{"-data-dir", p.Dir, "-fsync", "everysec", "-config", conf}, p.Args...)
	if p.Quiet {
		if p.HTTPAddr, err = freeLoopback(); err != nil {
			return nil, err
		}
		args = append(args, "-http-addr", p.HTTPAddr) // a later -http-addr wins over SpawnWith's
	}
	lb := &logBuffer{out: p.Log}
	var live *Spawned // killed on the way out
	defer func() {
		if live != nil {
			live.Kill()
		}
	}()
	spawn := func(what string) (*Spawned, error) {
		s, err := SpawnWith(ctx, SpawnOptions{Path: p.Bin, CPUs: p.ServerCPUs, Args: args, Log: lb,
			Env: []string{"TICKWHEEL_ADMIN_TOKEN=" + p.Token}})
		if err != nil {
			return nil, fmt.Errorf("scale: %s: %w", what, err)
		}
		s.StopWait = 10 * time.Minute
		p.Logf("scale: %s: pid %d on %s, accepting after %v", what, s.PID(), s.Addr, s.Ready.Sub(s.Started).Round(time.Millisecond))
		live = s
		return s, nil
	}
	s, err := spawn("first start (empty)")
	if err != nil {
		return nil, err
	}
	if st, err := ReadProc(s.PID()); err == nil {
		rep.RSSEmptyMiB = kib2mib(st.RSSKiB)
	}

	rep.AddBegan = time.Now()
	if err := p.addTimers(ctx, s.Addr, rep); err != nil {
		return rep, err
	}
	rep.AddEnded = time.Now()
	if st, err := ReadProc(s.PID()); err == nil {
		rep.RSSAddedMiB = kib2mib(st.RSSKiB)
	}

	if err := p.fire(ctx, s, lb, rep); err != nil {
		return rep, err
	}
	if len(p.Alternate) > 0 {
		if err := p.alternate(ctx, s, lb, conf, rep); err != nil {
			return rep, err
		}
	}
	if p.Quiet {
		if err := p.quiet(ctx, s, lb, conf, rep); err != nil {
			return rep, err
		}
	}

	s.Kill()
	rep.Pauses = loopPauses(lb, rep)
	s, err = spawn("restart after SIGKILL")
	if err != nil {
		return rep, err
	}
	rep.RecoveryReady = s.Ready.Sub(s.Started)
	rep.readRecovered(lb)
	if st, err := ReadProc(s.PID()); err == nil {
		rep.RSSRecoveredMiB = kib2mib(st.RSSKiB)
	}
	rep.readReturned(lb, s.PID())
	if rep.TimersRecovered != p.N {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the restart recovered %d timers, want %d", rep.TimersRecovered, p.N))
	}
	s.Kill()
	if rep.Firing != nil && rep.Firing.Failed {
		rep.Problems = append(rep.Problems, "the firing plan failed: "+fmt.Sprint(rep.Firing.Problems))
	}

	if p.RedisAddr != "" {
		n := p.N
		if p.RedisN > 0 {
			n = p.RedisN
		}
		if rep.Redis, err = RedisZSetMemory(ctx, p.RedisAddr, n, p.Receivers, p.Conns, p.Logf); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("redis: %v", err))
		}
	}
	return rep, nil
}

// fire runs the firing plan (the lateness scenario) over the held
// timers, then waits for a snapshot of all N.
func (p *ScaleParams) fire(ctx context.Context, s *Spawned, lb *logBuffer, rep *ScaleReport) error {
	rep.FireBegan = time.Now()
	tg := &TickwheelTarget{Addr: s.Addr, Token: p.Token, Pid: s.PID()}
	lp := DefaultParams()
	lp.Rate, lp.Duration, lp.Lead, lp.Conns = p.Rate, p.Duration, p.Lead, min(p.Conns, 8)
	var err error
	if rep.Firing, err = Lateness(ctx, tg, lp); err != nil {
		return fmt.Errorf("scale: the firing plan: %w", err)
	}
	rep.FireEnded = time.Now()
	if st, err := ReadProc(s.PID()); err == nil {
		rep.RSSFiredMiB, rep.HWMMiB = kib2mib(st.RSSKiB), kib2mib(st.HWMKiB)
	}
	p.Logf("scale: fired %d of %d at %d/s; waiting for a snapshot of all %d timers", rep.Firing.Delivered, rep.Firing.Expected, p.Rate, p.N)
	if err := waitFullSnapshot(ctx, lb, p.N, rep); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	return nil
}

// writeConfig writes the server's config file: limits that hold N timers
// (and the firing plan's), snapshots every SnapshotInterval.
func (p *ScaleParams) writeConfig() (string, error) {
	f, err := os.CreateTemp("", "tickwheel-scale-*.yaml")
	if err != nil {
		return "", err
	}
	interval := "-1s" // none
	if p.SnapshotInterval > 0 {
		interval = p.SnapshotInterval.String()
	}
	_, err = f.WriteString(p.config(interval, p.SnapshotPriority))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return filepath.Clean(f.Name()), err
}

// config is the server's config file with snapshot.min_interval interval
// and snapshot.priority priority ("": not set). snapshot.every_replay is
// off: the scenario decides when snapshots are written (every interval, or
// none while it measures without them), and a bound in the loop's time,
// which holds min_interval or not, would add its own.
func (p *ScaleParams) config(interval, priority string) string {
	perReceiver := (p.N+p.Receivers-1)/p.Receivers + 1
	plan := 2 * (int(int64(p.Rate)*int64(p.Duration)/int64(time.Second)) + 1000) // the firing plan, and the next one's
	nice := ""
	if p.SnapshotNice > 0 {
		nice = fmt.Sprintf("  nice: %d\n", p.SnapshotNice)
	}
	if priority != "" {
		nice += fmt.Sprintf("  priority: %s\n", priority)
	}
	return fmt.Sprintf("limits:\n  max_timers: %d\n  max_timers_per_receiver: %d\n  max_receivers: %d\n"+
		"snapshot:\n  every_records: 10\n  every_replay: -1s\n  min_interval: %s\n%s",
		p.N+plan, max(perReceiver, 100_000), max(p.Receivers+100_000, 1_000_000), interval, nice)
}

// scaleTimer is the i-th scale timer: receiver scaleBase + i % receivers,
// tid i / receivers + 1, due 1 hour to 1 week after base, in order of i.
func scaleTimer(i, n, receivers int, base int64) Timer {
	span := int64(7*24*time.Hour - time.Hour)
	due := base + int64(time.Hour) + int64(float64(span)*float64(i)/float64(max(n, 1)))
	return Timer{Receiver: scaleBase + uint64(i%receivers), Tid: uint64(i/receivers + 1), Due: due, Repeat: 1}
}

// addTimers adds the N timers, worker w the ones with i % Conns == w,
// Batch at a time, and notes adds/s over the first million (or all, when
// fewer) and over the whole.
func (p *ScaleParams) addTimers(ctx context.Context, addr string, rep *ScaleReport) error {
	t := &TickwheelTarget{Addr: addr, Token: p.Token, NoBind: true}
	if err := t.Open(ctx, p.Conns, func(int, *Delivery) {}); err != nil {
		return err
	}
	defer t.Close()
	base := Now()
	first := min(p.N, 1_000_000)
	var firstDone int64 // Now() when the first million was acknowledged, set by the worker that crossed it
	var added = make([]int, p.Conns)
	progress := newAddProgress(p.N, p.Logf)
	err := parallel(p.Conns, func(w int) error {
		batch := make([]Timer, 0, p.Batch)
		for i := w; i < p.N; {
			batch = batch[:0]
			for ; i < p.N && len(batch) < p.Batch; i += p.Conns {
				batch = append(batch, scaleTimer(i, p.N, p.Receivers, base))
			}
			r, err := t.Add(ctx, w, batch)
			if err == nil && r.OK != len(batch) {
				err = fmt.Errorf("%d of %d adds accepted: %v", r.OK, len(batch), r.Errors)
			}
			if err != nil {
				return err
			}
			added[w] += len(batch)
			if done := progress.add(len(batch)); done >= first && done-len(batch) < first {
				firstDone = Now()
			}
		}
		return nil
	})
	el := Now() - base
	if err != nil {
		return fmt.Errorf("scale: adding %d timers: %w", p.N, err)
	}
	rep.AddsPerSec = float64(p.N) / (float64(el) / 1e9)
	if firstDone > 0 {
		rep.AddsPerSecFirst = float64(first) / (float64(firstDone-base) / 1e9)
	}
	p.Logf("scale: added %d timers in %v (%.2fM/s; the first %d at %.2fM/s)", p.N, time.Duration(el).Round(time.Millisecond),
		rep.AddsPerSec/1e6, first, rep.AddsPerSecFirst/1e6)
	return nil
}

// waitFullSnapshot waits for a "snapshot written" line of at least n
// timers that began after the adds ended, and notes its bytes per timer.
func waitFullSnapshot(ctx context.Context, lb *logBuffer, n int, rep *ScaleReport) error {
	deadline := time.Now().Add(10*time.Minute + time.Duration(n)*2*time.Microsecond)
	for {
		for _, l := range lb.lines("snapshot written") {
			timers, _ := strconv.Atoi(l["timers"])
			bytes, _ := strconv.ParseInt(l["bytes"], 10, 64)
			if timers >= n && logBegan(l).After(rep.AddEnded) {
				rep.SnapshotBytes, rep.SnapshotTimers = bytes, timers
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no snapshot of all %d timers was written", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logBegan is when the work a log line reports on began: its time less
// its took (a snapshot is logged when written; its loop pause was at its
// start).
func logBegan(l map[string]string) time.Time {
	at, err := time.Parse(time.RFC3339Nano, l["time"])
	if err != nil {
		return time.Time{}
	}
	took, _ := time.ParseDuration(l["took"])
	return at.Add(-took)
}

// returnFrom is the snapshot size from which the server returns the memory
// of its recovery at start (server/memreturn.go, memReturnRecovered).
const returnFrom = 8 << 20

// readReturned waits for the restarted server to return the memory its
// recovery let go (its "memory returned after recovery" line), 30 s at
// most (a server without that line: RSS 30 s after the restart), and
// reads its RSS then. Under returnFrom of snapshot it reads it at once.
func (rep *ScaleReport) readReturned(lb *logBuffer, pid int) {
	wait := 30 * time.Second
	if rep.SnapshotBytes < returnFrom {
		wait = 0
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l := lb.lines("memory returned after recovery"); len(l) > 0 {
			rep.ReturnedTook, _ = time.ParseDuration(l[0]["took"])
			rep.ReturnedLogged = true
			break
		}
	}
	if st, err := ReadProc(pid); err == nil {
		rep.RSSReturnedMiB = kib2mib(st.RSSKiB)
	}
}

func kib2mib(k int64) float64 { return float64(k) / 1024 }
