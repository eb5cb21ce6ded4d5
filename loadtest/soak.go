package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SoakParams configure Soak.
type SoakParams struct {
	Bin      string        // the tickwheel binary
	Dir      string        // a directory of the caller's (empty): the data dir and config go here
	Duration time.Duration // how long the traffic runs
	Kills    int           // kill -9 and restarts, spread over Duration
	DiskFull int           // disk-full episodes (Linux), spread over Duration between the kills
	FullFor  time.Duration // how long each disk-full episode lasts

	SlowReaders int // sessions that never read (1 MiB max_outbound each)
	Partial     int // connections holding a partial frame at once
	HTTPWorkers int // goroutines sending operator HTTP requests
	HTTPIdle    int // idle keep-alive operator connections held

	Log  io.Writer            // the server's log (nil: discarded)
	Logf func(string, ...any) // progress lines (nil: none)
	// LateLog gets, at the end, each event of the well-behaved receiver
	// in due order: its due instant (UTC, ms) and its lateness in ms, one
	// a line, to set against the server's log (nil: none).
	LateLog io.Writer
}

// Soak's server configuration: the budgets that bound its memory, from
// which SoakReport.BudgetMiB is computed.
const (
	soakMaxOutbound     = 1 << 20
	soakMaxInbound      = 1 << 20
	soakBacklogBytesTot = 32 << 20
	soakOutboxBytesTot  = 32 << 20
	soakDataTotal       = 64 << 20
)

var soakConfig = fmt.Sprintf(`limits:
  max_outbound: %d
  max_inbound: %d
  max_backlog_bytes_total: %d
  max_outbox_bytes_total: %d
  max_data_total: %d
snapshot:
  min_interval: 5s
  every_records: 100000
`, soakMaxOutbound, soakMaxInbound, soakBacklogBytesTot, soakOutboxBytesTot, soakDataTotal)

// SoakReport is what a soak saw. Lost and Unreported are the zero-tolerance
// figures; the others are reported as they are.
type SoakReport struct {
	Duration                    time.Duration
	Kills, DiskFull             int
	DiskFullSkipped             string // why no disk-full episode ran, if none did
	AddsAcked, CancelsAcked     int64
	Missing, Resurrected        int64 // acknowledged changes lost
	RefusedPresent, Unsure      int64
	WellExpected, WellMissing   int
	WellReported, Redelivered   int64
	WellRefused                 int64
	RSSBaselineMiB, MaxRSSMiB   float64
	BudgetMiB                   float64
	BudgetFormula               string
	LateN                       int
	LateP50, LateP99, LateWorst time.Duration // outside kill/restart and disk-full windows
	LateFullWorst               time.Duration // due inside a disk-full episode
	LateRestartWorst            time.Duration // due inside a kill/restart window
	LateWorstAt                 string        // when LateWorst's event was due, against the kills and disk-full episodes
	NotClosedInFull             int           // garbage connections not closed in 5 s that overlapped a disk-full episode
	NotClosedInRestart          int           // ... a kill/restart window
	WellSessions, AckErrors     int64
	AckError                    any
	Hostile                     *hostileCounts
	Problems                    []string // the server did not come back, a verify failed, ...
}

// Lost is the number of acknowledged changes lost (zero tolerance).
func (r *SoakReport) Lost() int64 { return r.Missing + r.Resurrected }

// Failed reports whether something of zero tolerance happened: an
// acknowledged change or an event lost without report, or a problem (the
// server did not come back, a check failed).
func (r *SoakReport) Failed() bool {
	return r.Lost() > 0 || r.Unreported() > 0 || len(r.Problems) > 0
}

// Unreported is the number of the well-behaved receiver's events lost
// without a report (zero tolerance).
func (r *SoakReport) Unreported() int64 {
	return max(0, int64(r.WellMissing)-r.WellReported)
}

// soakRun is one soak in progress.
type soakRun struct {
	p         SoakParams
	token     string
	addr      string
	httpAddr  string
	args      []string
	srv       *Spawned
	pid       atomic.Int64
	dur       *durableCheck
	well      *wellBehaved
	host      *hostileCounts
	restarts  []window
	fulls     []window
	start     time.Time
	maxRSSKiB atomic.Int64
	down      bool // the server did not start again after a kill: the soak ends
	logf      func(string, ...any)
}

// Soak runs a durable server (fsync always) under mixed hostile traffic
// for p.Duration — garbage and partial frames, hello floods, sessions that
// never read, unknown time zones, an HTTP flood and idle keep-alive
// connections on the operator port — with p.DiskFull disk-full episodes
// (RLIMIT_FSIZE set on the running server) and p.Kills kill -9s, each
// followed by a restart and a check of every acknowledged change. Beside
// the hostile clients, a well-behaved receiver in acknowledged mode adds a
// timer every 20 ms and checks that each one it was acknowledged fires.
// Loopback only.
func Soak(ctx context.Context, p SoakParams) (*SoakReport, error) {
	r := &soakRun{p: p, dur: newDurableCheck(), well: newWellBehaved(), host: &hostileCounts{},
		token: fmt.Sprintf("soak-admin-%d", time.Now().UnixNano()), logf: p.Logf}
	if r.logf == nil {
		r.logf = func(string, ...any) {}
	}
	cfg := filepath.Join(p.Dir, "soak.yaml")
	if err := os.WriteFile(cfg, []byte(soakConfig), 0o600); err != nil {
		return nil, err
	}
	var err error
	if r.addr, err = freeLoopback(); err != nil {
		return nil, err
	}
	if r.httpAddr, err = freeLoopback(); err != nil {
		return nil, err
	}
	r.args = []string{"-data-dir", filepath.Join(p.Dir, "data"), "-fsync", "always", "-tick", "10ms",
		"-config", cfg, "-http-addr", r.httpAddr}
	if err := r.spawn(ctx); err != nil {
		return nil, err
	}
	rep := &SoakReport{Duration: p.Duration, Hostile: r.host}
	time.Sleep(300 * time.Millisecond)
	if st, err := ReadProc(r.srv.PID()); err == nil {
		rep.RSSBaselineMiB = float64(st.RSSKiB) / 1024
	}
	sampler := r.sampleRSS(ctx)
	start := time.Now()
	r.start = start
	end := start.Add(p.Duration)
	stopEpoch := r.startTraffic(ctx, end)
	for _, ev := range soakPlan(p) {
		sleepCtx(ctx, time.Until(start.Add(ev.at)))
		if ctx.Err() != nil || r.down {
			break
		}
		if ev.kill {
			stopEpoch = r.killRestart(ctx, rep, stopEpoch, end)
		} else {
			r.diskFull(ctx, rep)
		}
	}
	if r.down { // nothing to check against: the report says why
		stopEpoch()
		sampler()
		r.fill(rep)
		return rep, nil
	}
	sleepCtx(ctx, time.Until(end))
	// The adds stopped at end; the well-behaved receiver gets its last
	// events (a grace of up to 10 s), then everything stops.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m, _ := r.well.missing(); m == 0 {
			break
		}
	}
	stopEpoch()
	if err := r.dur.verify(r.addr, r.token); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("final verify: %v", err))
	}
	sampler()
	if err := r.srv.Stop(); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("graceful stop at the end: %v", err))
	}
	r.fill(rep)
	return rep, nil
}

// soakEvent is a kill -9 or a disk-full episode, at an offset from the
// start.
type soakEvent struct {
	at   time.Duration
	kill bool
}

// soakPlan spreads the kills evenly over the run and puts the disk-full
// episodes between them, in time order.
func soakPlan(p SoakParams) []soakEvent {
	var evs []soakEvent
	n := max(p.Kills, p.DiskFull)
	slot := p.Duration / time.Duration(n+1)
	for i := range n {
		if i < p.DiskFull {
			evs = append(evs, soakEvent{at: slot*time.Duration(i) + slot/2})
		}
		if i < p.Kills {
			evs = append(evs, soakEvent{at: slot * time.Duration(i+1), kill: true})
		}
	}
	return evs
}

func (r *soakRun) spawn(ctx context.Context) error {
	lw := r.p.Log
	if lw == nil {
		lw = io.Discard
	}
	s, err := SpawnWith(ctx, SoakSpawn(r.p.Bin, r.addr, r.args, r.token, lw))
	if err != nil {
		return err
	}
	s.StopWait = 30 * time.Second
	r.srv = s
	r.pid.Store(int64(s.PID()))
	return nil
}

// SoakSpawn is how the soak starts the server: on addr (kept across
// restarts, so clients reconnect to the same place), unpinned, with the
// admin token in its environment.
func SoakSpawn(bin, addr string, args []string, token string, log io.Writer) SpawnOptions {
	return SpawnOptions{Path: bin, Addr: addr, Args: args, Log: log, Env: []string{"TICKWHEEL_ADMIN_TOKEN=" + token}}
}

// startTraffic starts every client; the returned stop ends them and waits.
func (r *soakRun) startTraffic(ctx context.Context, addUntil time.Time) (stop func()) {
	ectx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	goes := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	goes(func() { r.well.run(ectx, r.addr, addUntil) })
	goes(func() { r.dur.run(tillCtx(ectx, addUntil), r.addr) })
	hctx := tillCtx(ectx, addUntil)
	for i := range 2 {
		goes(func() { r.host.runGarbage(hctx, r.addr, uint64(time.Now().UnixNano())+uint64(i)) })
	}
	goes(func() { r.host.runPartial(hctx, r.addr, r.p.Partial) })
	goes(func() { r.host.runHellos(hctx, r.addr) })
	goes(func() { r.host.runZoneAdds(hctx, r.addr) })
	for i := range r.p.SlowReaders {
		goes(func() { r.host.runSlowReader(hctx, r.addr, 1<<51|uint64(i)) })
	}
	goes(func() { r.host.runHTTPFlood(hctx, "http://"+r.httpAddr, r.p.HTTPWorkers) })
	goes(func() { r.host.runHTTPIdle(hctx, r.httpAddr, r.p.HTTPIdle) })
	return func() { cancel(); wg.Wait() }
}

// tillCtx is ctx ending at t at the latest. Its cancel is left to ctx's end.
func tillCtx(ctx context.Context, t time.Time) context.Context {
	c, cancel := context.WithDeadline(ctx, t)
	context.AfterFunc(ctx, cancel)
	return c
}

// killRestart kills the server with SIGKILL in the middle of the traffic,
// stops the clients, restarts the server, checks every acknowledged
// change, and starts the clients again.
func (r *soakRun) killRestart(ctx context.Context, rep *SoakReport, stop func(), end time.Time) func() {
	w := window{from: time.Now().Add(-wellLead)}
	r.updateRSS()
	r.srv.Kill()
	rep.Kills++
	r.logf("soak: kill -9 #%d at %s", rep.Kills, time.Now().Format("15:04:05.000"))
	stop()
	if err := r.spawn(ctx); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("restart after kill %d: %v", rep.Kills, err))
		r.logf("soak: PROBLEM: the server did not start again after kill %d: %v", rep.Kills, err)
		r.down = true
		return func() {}
	}
	if err := r.dur.verify(r.addr, r.token); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("verify after kill %d: %v", rep.Kills, err))
	}
	r.logf("soak: restarted and checked %v after the kill; acknowledged changes lost so far: %d", time.Since(w.from.Add(wellLead)).Round(time.Millisecond),
		r.dur.missing.Load()+r.dur.resurrected.Load())
	w.to = time.Now().Add(2 * time.Second) // the catch-up after the restart
	r.restarts = append(r.restarts, w)
	return r.startTraffic(ctx, end)
}

// diskFull makes the server's files unable to grow (RLIMIT_FSIZE 1 on the
// running process: writes fail with EFBIG, as on a full disk) for
// p.FullFor, then lifts the limit.
func (r *soakRun) diskFull(ctx context.Context, rep *SoakReport) {
	pid := int(r.pid.Load())
	old, err := setFileSizeLimit(pid, 1)
	if err != nil {
		rep.DiskFullSkipped = err.Error()
		return
	}
	// An event due just before is counted in: its firing's record may be
	// in the turn the limit failed.
	w := window{from: time.Now().Add(-100 * time.Millisecond)}
	rep.DiskFull++
	r.logf("soak: disk full #%d for %v", rep.DiskFull, r.p.FullFor)
	sleepCtx(ctx, r.p.FullFor)
	if _, err := setFileSizeLimit(pid, old); err != nil && int(r.pid.Load()) == pid {
		rep.Problems = append(rep.Problems, fmt.Sprintf("lifting the file size limit: %v", err))
	}
	w.to = time.Now().Add(time.Second)
	r.fulls = append(r.fulls, w)
}

// sampleRSS follows the server's RSS every 200 ms; the returned func stops it.
func (r *soakRun) sampleRSS(ctx context.Context) func() {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			r.updateRSS()
			sleepCtx(sctx, 200*time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func (r *soakRun) updateRSS() {
	if st, err := ReadProc(int(r.pid.Load())); err == nil {
		kib := max(st.RSSKiB, st.HWMKiB)
		for {
			cur := r.maxRSSKiB.Load()
			if kib <= cur || r.maxRSSKiB.CompareAndSwap(cur, kib) {
				break
			}
		}
	}
}

// describe places t against the run: its offset from the start, and from
// the nearest kill or disk-full episode.
func (r *soakRun) describe(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	what, best := "", time.Duration(1<<62)
	for _, ws := range []struct {
		name string
		ws   []window
	}{{"disk-full episode", r.fulls}, {"kill", r.restarts}} {
		for _, w := range ws.ws {
			for _, edge := range []struct {
				at  time.Time
				rel string
			}{{w.from, "before the start of a "}, {w.to, "after the end of a "}} {
				d := t.Sub(edge.at)
				if d < 0 && edge.rel[0] == 'a' || d > 0 && edge.rel[0] == 'b' {
					continue
				}
				if d.Abs() < best {
					best, what = d.Abs(), fmt.Sprintf("%.1f s %s%s window", d.Abs().Seconds(), edge.rel, ws.name)
				}
			}
		}
	}
	s := fmt.Sprintf("at t=%.1f s", t.Sub(r.start).Seconds())
	if what != "" {
		s += ", " + what
	}
	return s
}

// fill completes the report from the checkers.
func (r *soakRun) fill(rep *SoakReport) {
	d, w := r.dur, r.well
	rep.AddsAcked, rep.CancelsAcked = d.addsAcked.Load(), d.cancelsAcked.Load()
	rep.Missing, rep.Resurrected = d.missing.Load(), d.resurrected.Load()
	rep.RefusedPresent, rep.Unsure = d.refusedPresent.Load(), d.unsure.Load()
	rep.WellMissing, rep.WellExpected = w.missing()
	rep.WellReported = w.reportedDropped.Load() + w.dropNotices.Load()
	rep.Redelivered, rep.WellRefused = w.redelivered.Load(), w.addsRefused.Load()
	rep.WellSessions, rep.AckErrors, rep.AckError = w.sessions.Load(), w.ackErrors.Load(), w.ackError.Load()
	rep.MaxRSSMiB = float64(r.maxRSSKiB.Load()) / 1024
	mib := float64(1 << 20)
	conns := float64(r.p.SlowReaders + 4) // the slow readers, the checked clients and the hostile session
	rep.BudgetMiB = rep.RSSBaselineMiB + (soakBacklogBytesTot+soakOutboxBytesTot+soakDataTotal)/mib +
		conns*(soakMaxOutbound+soakMaxInbound)/mib
	rep.BudgetFormula = fmt.Sprintf("baseline %.0f + backlogs %d + outboxes %d + timer data %d + %d sessions x (max_outbound %d + max_inbound %d) MiB",
		rep.RSSBaselineMiB, soakBacklogBytesTot>>20, soakOutboxBytesTot>>20, soakDataTotal>>20, int(conns), soakMaxOutbound>>20, soakMaxInbound>>20)
	if r.p.LateLog != nil {
		w.writeSamples(r.p.LateLog)
	}
	skip := append(append([]window(nil), r.restarts...), r.fulls...)
	var worstDue time.Time
	rep.LateN, rep.LateP50, rep.LateP99, rep.LateWorst, worstDue = w.lateness(nil, skip)
	rep.LateWorstAt = r.describe(worstDue)
	if len(r.fulls) > 0 {
		_, _, _, rep.LateFullWorst, _ = w.lateness(r.fulls, r.restarts)
	}
	if len(r.restarts) > 0 {
		_, _, _, rep.LateRestartWorst, _ = w.lateness(r.restarts, nil)
	}
	r.host.mu.Lock()
	for _, t := range r.host.notClosed {
		switch {
		case inAny(t, r.fulls) || inAny(t.Add(5*time.Second), r.fulls):
			rep.NotClosedInFull++
		case inAny(t, r.restarts) || inAny(t.Add(5*time.Second), r.restarts):
			rep.NotClosedInRestart++
		}
	}
	r.host.mu.Unlock()
}

// Print writes the report: the four figures first, then the details.
func (rep *SoakReport) Print(out io.Writer) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	fmt.Fprintf(out, "soak %v: %d kill -9 + restart, %d disk-full episodes%s\n", rep.Duration, rep.Kills, rep.DiskFull, skipped(rep.DiskFullSkipped))
	fmt.Fprintf(out, "acknowledged changes lost:       %d (adds acked %d, cancels acked %d; missing %d, resurrected %d; outcome unknown at a kill %d, refused adds found present %d)\n",
		rep.Lost(), rep.AddsAcked, rep.CancelsAcked, rep.Missing, rep.Resurrected, rep.Unsure, rep.RefusedPresent)
	fmt.Fprintf(out, "events lost without report:      %d (well-behaved receiver: %d acked adds, %d never fired, %d reported dropped; %d redelivered after kills; %d adds refused)\n",
		rep.Unreported(), rep.WellExpected, rep.WellMissing, rep.WellReported, rep.Redelivered, rep.WellRefused)
	fmt.Fprintf(out, "max RSS:                         %.1f MiB against a configured budget of %.1f MiB (%.2fx) [%s]\n",
		rep.MaxRSSMiB, rep.BudgetMiB, rep.MaxRSSMiB/max(rep.BudgetMiB, 1), rep.BudgetFormula)
	fmt.Fprintf(out, "well-behaved receiver lateness:  worst %s, p99 %s, p50 %s over %d events due outside kills and disk-full episodes (the worst due %s); worst %s due during a disk-full episode, %s due across a kill -9 and restart\n",
		ms(rep.LateWorst), ms(rep.LateP99), ms(rep.LateP50), rep.LateN, rep.LateWorstAt, ms(rep.LateFullWorst), ms(rep.LateRestartWorst))
	fmt.Fprintf(out, "well-behaved receiver: %d sessions, %d ack errors (first: %v)\n", rep.WellSessions, rep.AckErrors, rep.AckError)
	h := rep.Hostile
	fmt.Fprintf(out, "hostile: garbage conns %d (closed by the server %d, not closed in 5 s %d: %d overlapping a disk-full episode, %d a kill); partial frames %d (closed by the server %d); hello replies %d, errors %d; slow-reader sessions %d; unknown-zone adds %d\n",
		h.garbage.Load(), h.garbageClosed.Load(), h.garbageNotClosed.Load(), rep.NotClosedInFull, rep.NotClosedInRestart, h.partial.Load(), h.partialClosed.Load(),
		h.hellos.Load(), h.helloErrors.Load(), h.slowSessions.Load(), h.zoneAdds.Load())
	fmt.Fprintf(out, "operator HTTP: %d requests (2xx %d, 4xx %d, 5xx %d, failed %d); %d idle keep-alive connections opened, %d closed by the server (or its kill)\n",
		h.httpReqs.Load(), h.http2xx.Load(), h.http4xx.Load(), h.http5xx.Load(), h.httpErrs.Load(), h.httpIdle.Load(), h.httpIdleClosed.Load())
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "PROBLEM: %s\n", p)
	}
}

func skipped(why string) string {
	if why == "" {
		return ""
	}
	return " (disk-full skipped: " + strings.TrimSpace(why) + ")"
}

// freeLoopback returns a free loopback address.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// errNoDiskFull is returned where RLIMIT_FSIZE cannot be set.
var errNoDiskFull = errors.New("disk-full episodes need Linux (prlimit)")
