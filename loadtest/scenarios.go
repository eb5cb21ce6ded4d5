package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Params are the knobs of every scenario; each uses the ones it names.
type Params struct {
	N     int // timers (add, cancel, fire, ff)
	Conns int // workers / connections

	Lead      time.Duration // how long before its due a timer is added (lateness), or before the first due (cancel, repeat, fire)
	Grace     time.Duration // how long after the last due to wait for missing deliveries
	Tolerance time.Duration // a delivery earlier than due − Tolerance counts as early

	K, P, R int // repeating: K timers every P ticks, R firings each (R <= 64)

	Rate     int           // lateness: fires per second
	Duration time.Duration // lateness: how long

	Idle int           // idle: connections
	Hold time.Duration // idle, hold: how long to hold the connections or timers while measuring

	Span uint64 // ff: ticks the timers are spread over (1 = all due on the same tick)

	// KeepSamples keeps each delivery's due and lateness in
	// Result.Samples, to split a plan by time afterwards (scale_alt.go).
	KeepSamples bool
}

// DefaultParams are moderate sizes for a 2-core machine.
func DefaultParams() Params {
	return Params{N: 100_000, Conns: 8, Lead: 200 * time.Millisecond, Grace: 2 * time.Second,
		K: 1000, P: 10, R: 5, Rate: 50_000, Duration: 5 * time.Second, Idle: 10_000, Hold: 3 * time.Second, Span: 8_640_000}
}

// Scenario is one of the scenarios.
type Scenario struct {
	Name string
	Doc  string
	Run  func(ctx context.Context, tg Target, p Params) (*Result, error)
}

// Scenarios lists the scenarios in the order a full run does them.
var Scenarios = []Scenario{
	{"add", "N timers far in the future added over Conns connections, then cleared: adds/s", AddThroughput},
	{"cancel", "N timers added, every other one cancelled before its due, the rest fire: cancelled ones must not", CancelHeavy},
	{"repeat", "K timers every P ticks, R firings each: K×R delivered, no duplicates, none early", Repeating},
	{"fire", "N timers due at the same instant (real time): events/s delivered", FireThroughput},
	{"lateness", "a fixed plan of Rate fires/s for Duration, each added Lead ahead: lateness", Lateness},
	{"idle", "Idle connections held idle: server RSS and CPU", IdleConns},
	{"hold", "N timers due 1 hour to 1 week away, held for Hold: server RSS per timer and idle CPU", HoldTimers},
	{"ff", "N timers over Span ticks on a frozen clock, one fast-forward across them: time and fires/s", FastForwardCost},
}

// ScenarioByName finds a scenario.
func ScenarioByName(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// ErrUnsupported is returned by a scenario the target cannot run.
var ErrUnsupported = errors.New("not supported by this target")

// receiverOf is the receiver of timer i: worker i%conns owns 64 receivers.
func receiverOf(i, conns int) uint64 {
	return uint64(i%conns+1)<<24 | uint64(i/conns%64)
}

// plan makes n one-shot timers, timer i due at due(i), spread over conns workers.
func plan(n, conns int, every time.Duration, repeat int, due func(i int) int64) [][]Timer {
	per := make([][]Timer, conns)
	for i := range n {
		d := due(i)
		w := i % conns
		per[w] = append(per[w], Timer{Receiver: receiverOf(i, conns), Tid: uint64(i + 1), Due: d, Every: every, Repeat: uint32(repeat), Data: dueData(d)})
	}
	return per
}

// parallel runs f for each worker and returns the first error.
func parallel(conns int, f func(w int) error) error {
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() { errs[w] = f(w) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// addAll adds each worker's timers, all workers at once, and totals the results.
func addAll(ctx context.Context, tg Target, per [][]Timer) (AddResult, error) {
	var mu sync.Mutex
	tot := AddResult{Errors: map[string]int{}}
	err := parallel(len(per), func(w int) error {
		r, err := tg.Add(ctx, w, per[w])
		mu.Lock()
		tot.OK += r.OK
		for k, v := range r.Errors {
			tot.Errors[k] += v
		}
		mu.Unlock()
		return err
	})
	return tot, err
}

// run is the frame of a scenario: it opens the target with a collector and
// fills the common parts of the result.
type run struct {
	tg     Target
	p      Params
	c      *collector
	res    *Result
	pid    int
	before ProcStats
	counts *Counters // the target's totals after Open (Counter targets)
}

func start(ctx context.Context, name string, tg Target, p Params, n int, every time.Duration) (*run, error) {
	r := &run{tg: tg, p: p, res: &Result{Scenario: name, Target: tg.Name(), Params: map[string]any{}}}
	r.c = newCollector(n, every, p.Tolerance, tg)
	r.c.keep = p.KeepSamples
	if pr, ok := tg.(Process); ok && pr.PID() > 0 {
		r.pid = pr.PID()
		r.before, _ = ReadProc(r.pid)
	}
	if err := tg.Open(ctx, p.Conns, r.c.sink); err != nil {
		return nil, err
	}
	if ct, ok := tg.(Counter); ok {
		c, err := ct.Counters(ctx)
		if err != nil {
			_ = tg.Close()
			return nil, fmt.Errorf("%s: counters: %w", tg.Name(), err)
		}
		r.counts = &c
	}
	return r, nil
}

// wait waits until want deliveries arrived and the clock passed settle, or
// until deadline.
func (r *run) wait(want int64, settle, deadline int64) {
	for {
		now := Now()
		if (r.c.delivered.Load() >= want && now >= settle) || now >= deadline {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// finish closes the target and checks the invariants.
func (r *run) finish(ctx context.Context, expected int64, want func(i int) int) *Result {
	res := r.res
	if r.counts != nil {
		if c, err := r.tg.(Counter).Counters(ctx); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("counters: %v", err))
		} else {
			res.Counted = &Counters{Fired: c.Fired - r.counts.Fired, Dropped: c.Dropped - r.counts.Dropped}
		}
	}
	_ = r.tg.Clear(ctx)
	_ = r.tg.Close()
	res.Expected = expected
	res.Delivered = r.c.delivered.Load()
	res.Duplicates = r.c.dups.Load()
	res.Early = r.c.early.Load()
	res.Unknown = r.c.unknown.Load()
	if want != nil {
		res.Missing = r.c.missing(want)
	}
	target := int64(0)
	if r.c.quant != nil {
		target = int64(r.tg.Tick() / time.Microsecond)
	}
	target += 1000 // ≤ 1 tick + 1 ms for a ticked target, ≤ 1 ms otherwise
	if ce, ok := r.tg.(interface{ CalibrationError() time.Duration }); ok && !r.c.virtual {
		res.Params["calibration_uncertainty"] = ce.CalibrationError().String()
	}
	if !r.c.virtual {
		l := r.c.latencies(target)
		res.Lateness, res.TickLateness, res.SocketLateness, res.SocketTickLateness = l.Raw, l.OnTick, l.Socket, l.SocketOnTick
		res.Samples = r.c.samples()
		if l.Socket != nil && l.Raw != nil && l.Socket.Count < l.Raw.Count {
			res.Notes = append(res.Notes, fmt.Sprintf("lateness at the socket covers %d of %d deliveries (the rest came in reads without a receive stamp)", l.Socket.Count, l.Raw.Count))
		}
	}
	if n, ok := r.tg.(Noter); ok {
		res.Notes = append(res.Notes, n.Notes()...)
	}
	if r.pid > 0 {
		after, _ := ReadProc(r.pid)
		res.Server = &ServerStats{PID: r.pid, Before: r.before, After: after, CPUSeconds: after.CPUSeconds - r.before.CPUSeconds}
	}
	res.check()
	return res
}

// AddThroughput: N timers due in an hour, added over Conns connections at
// once; adds/s is N over the time until the last add was acknowledged. The
// timers are then cleared, so nothing fires.
func AddThroughput(ctx context.Context, tg Target, p Params) (*Result, error) {
	r, err := start(ctx, "add", tg, p, p.N, 0)
	if err != nil {
		return nil, err
	}
	due := Now() + int64(time.Hour)
	per := plan(p.N, p.Conns, 0, 1, func(int) int64 { return due })
	t0 := Now()
	ar, err := addAll(ctx, tg, per)
	el := Now() - t0
	r.res.Scheduled, r.res.AddErrors = int64(ar.OK), ar.Errors
	r.res.setRate("adds/s", p.N, el)
	r.res.Params["n"], r.res.Params["conns"] = p.N, p.Conns
	res := r.finish(ctx, 0, nil)
	return res, err
}

// CancelHeavy: N timers due Lead from now (spread over 100 ms), every other
// one cancelled as soon as all are added; the rest fire. A cancel that
// succeeded must never be followed by a firing.
func CancelHeavy(ctx context.Context, tg Target, p Params) (*Result, error) {
	r, err := start(ctx, "cancel", tg, p, p.N, 0)
	if err != nil {
		return nil, err
	}
	base := Now() + int64(p.Lead)
	per := plan(p.N, p.Conns, 0, 1, func(i int) int64 { return base + int64(i%100)*int64(time.Millisecond) })
	last := base + 99*int64(time.Millisecond)
	ar, err := addAll(ctx, tg, per)
	r.res.Scheduled, r.res.AddErrors = int64(ar.OK), ar.Errors
	if err != nil {
		return r.finish(ctx, 0, nil), err
	}
	var mu sync.Mutex
	cancelled := make([]bool, p.N)
	var nc int64
	t0 := Now()
	err = parallel(p.Conns, func(w int) error {
		var ks []Key
		for j, t := range per[w] {
			if j%2 == 1 {
				ks = append(ks, Key{t.Receiver, t.Tid})
			}
		}
		ok, err := tg.Cancel(ctx, w, ks)
		mu.Lock()
		for _, k := range ok {
			cancelled[k.Tid-1] = true
			nc++
		}
		mu.Unlock()
		return err
	})
	el := Now() - t0
	r.res.setRate("cancels/s", int(nc), el)
	if Now() > base {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("cancels finished %v after the first due: raise -lead for a clean cancel-before-due run", time.Duration(Now()-base)))
	}
	r.res.Cancelled = nc
	want := int64(p.N) - nc
	r.wait(want, last+2*int64(tg.Tick())+int64(20*time.Millisecond), last+int64(p.Grace))
	for i, c := range cancelled {
		if c && r.c.seen[i].Load() != 0 {
			r.res.CancelledFired++
		}
	}
	r.res.Params["n"], r.res.Params["conns"], r.res.Params["lead"] = p.N, p.Conns, p.Lead.String()
	return r.finish(ctx, want, func(i int) int {
		if cancelled[i] {
			return 0
		}
		return 1
	}), err
}

// Repeating: K timers every P ticks, R firings each, first due Lead from now
// (spread over 10 ms). Each firing's intended due is first + (k−1)·P ticks.
func Repeating(ctx context.Context, tg Target, p Params) (*Result, error) {
	if p.R < 1 || p.R > 64 {
		return nil, fmt.Errorf("repeat: R must be 1..64")
	}
	r, err := start(ctx, "repeat", tg, p, p.K, 0)
	if err != nil {
		return nil, err
	}
	every := time.Duration(p.P) * tg.Tick() // Tick is known once the target is open
	r.c.every = int64(every)
	base := Now() + int64(p.Lead)
	per := plan(p.K, p.Conns, every, p.R, func(i int) int64 { return base + int64(i%10)*int64(time.Millisecond) })
	ar, err := addAll(ctx, tg, per)
	r.res.Scheduled, r.res.AddErrors = int64(ar.OK)*int64(p.R), ar.Errors
	last := base + 9*int64(time.Millisecond) + int64(p.R-1)*int64(every)
	want := int64(p.K) * int64(p.R)
	r.wait(want, last+2*int64(tg.Tick())+int64(20*time.Millisecond), last+int64(p.Grace))
	r.res.setRate("fires/s", int(r.c.delivered.Load()), r.c.lastRecv.Load()-base)
	r.res.Params["k"], r.res.Params["p_ticks"], r.res.Params["r"], r.res.Params["every"] = p.K, p.P, p.R, every.String()
	return r.finish(ctx, want, func(int) int { return p.R }), err
}

// FireThroughput: N timers all due at one instant, Lead from now (which
// must leave time to add them all). The rate is N over the time from that
// instant (quantised to its tick for a ticked target) to the last receipt.
func FireThroughput(ctx context.Context, tg Target, p Params) (*Result, error) {
	r, err := start(ctx, "fire", tg, p, p.N, 0)
	if err != nil {
		return nil, err
	}
	due := Now() + int64(p.Lead)
	per := plan(p.N, p.Conns, 0, 1, func(int) int64 { return due })
	ar, err := addAll(ctx, tg, per)
	r.res.Scheduled, r.res.AddErrors = int64(ar.OK), ar.Errors
	if late := Now() - due; late > 0 {
		r.res.Problems = append(r.res.Problems, fmt.Sprintf("adds finished %v after the due instant: raise -lead", time.Duration(late)))
	}
	r.wait(int64(p.N), due, due+int64(p.Grace))
	from := due
	if r.c.quant != nil {
		from = r.c.quant.DueInstant(due)
	}
	r.res.setRate("fires/s", int(r.c.delivered.Load()), r.c.lastRecv.Load()-from)
	r.res.Params["n"], r.res.Params["conns"], r.res.Params["lead"] = p.N, p.Conns, p.Lead.String()
	return r.finish(ctx, int64(p.N), func(int) int { return 1 }), err
}

// sendWindow batches the lateness scenario's adds: a worker sends at once
// every timer whose send instant (due − Lead) falls within the next
// sendWindow, then sleeps until the next one. Sending up to sendWindow early
// is harmless (Lead is far longer) and saves the generator thousands of
// wake-ups and small writes per second, which would otherwise delay its
// receipt of firings and show up as the server's lateness.
const sendWindow = 5 * time.Millisecond

// Lateness runs a fixed plan (wrk2-style, no coordinated omission): timer i
// is due at t0 + Lead + i/Rate, decided before the run; each worker adds
// its timers when their send instant (due − Lead) comes, in whatever
// batches it can, and lateness is always measured from the intended due,
// so a generator or server that falls behind shows up as lateness.
func Lateness(ctx context.Context, tg Target, p Params) (*Result, error) {
	n := int(int64(p.Rate) * int64(p.Duration) / int64(time.Second))
	if n < 1 {
		return nil, fmt.Errorf("lateness: rate × duration < 1")
	}
	r, err := start(ctx, "lateness", tg, p, n, 0)
	if err != nil {
		return nil, err
	}
	t0 := Now() + int64(p.Lead) // the first send instant, after a Lead of warm-up
	step := float64(time.Second) / float64(p.Rate)
	per := plan(n, p.Conns, 0, 1, func(i int) int64 { return t0 + int64(p.Lead) + int64(float64(i)*step) })
	var mu sync.Mutex
	var sendLag, addedLate int64
	errsum := map[string]int{}
	var ok int
	err = parallel(p.Conns, func(w int) error {
		ts := per[w]
		var lag, lateAdds int64
		for len(ts) > 0 {
			now := Now()
			k := 0
			for k < len(ts) && ts[k].Due-int64(p.Lead) <= now+int64(sendWindow) {
				k++
			}
			if k == 0 {
				// Wake when the first one must be sent, then send it with
				// every later one of the next sendWindow. (Waking when it
				// entered the window sent the timers one or two at a time.)
				time.Sleep(time.Duration(ts[0].Due - int64(p.Lead) - now))
				continue
			}
			lag = max(lag, now-(ts[k-1].Due-int64(p.Lead)), now-(ts[0].Due-int64(p.Lead)))
			res, err := tg.Add(ctx, w, ts[:k])
			acked := Now()
			for _, t := range ts[:k] {
				if t.Due < acked {
					lateAdds++
				}
			}
			mu.Lock()
			ok += res.OK
			for c, v := range res.Errors {
				errsum[c] += v
			}
			mu.Unlock()
			if err != nil {
				return err
			}
			ts = ts[k:]
		}
		mu.Lock()
		sendLag, addedLate = max(sendLag, lag), addedLate+lateAdds
		mu.Unlock()
		return nil
	})
	r.res.Scheduled, r.res.AddErrors = int64(ok), errsum
	last := t0 + int64(p.Lead) + int64(float64(n-1)*step)
	r.wait(int64(n), last, last+int64(p.Grace))
	r.res.setRate("fires/s", int(r.c.delivered.Load()), r.c.lastRecv.Load()-(t0+int64(p.Lead)))
	r.res.Params["rate"], r.res.Params["duration"], r.res.Params["lead"], r.res.Params["conns"], r.res.Params["n"] = p.Rate, p.Duration.String(), p.Lead.String(), p.Conns, n
	r.res.Params["max_send_lag"] = time.Duration(sendLag).String()
	r.res.Params["added_after_due"] = addedLate
	// The plan's window in wall-clock time (UTC, as the server's log), to
	// tell which server events (e.g. "snapshot written") fell inside it.
	wall := func(mono int64) string {
		return time.Now().Add(time.Duration(mono - Now())).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	r.res.Params["first_due_utc"], r.res.Params["last_due_utc"] = wall(t0+int64(p.Lead)), wall(last)
	if addedLate > 0 {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%d timers were acknowledged only after their due (generator or server behind by more than the lead); their lateness counts", addedLate))
	}
	return r.finish(ctx, int64(n), func(int) int { return 1 }), err
}

// IdleConns opens Idle connections that say hello and stay idle for Hold,
// and reports the server's RSS and CPU before, with them, and over the hold.
// It checks through stats that the server holds them all.
func IdleConns(ctx context.Context, tg Target, p Params) (*Result, error) {
	id, ok := tg.(Idler)
	if !ok {
		return nil, ErrUnsupported
	}
	soft, hard, rerr := RaiseNoFile(uint64(p.Idle) + 1024)
	r, err := start(ctx, "idle", tg, p, 0, 0)
	if err != nil {
		return nil, err
	}
	res := r.res
	res.Params["idle"], res.Params["hold"] = p.Idle, p.Hold.String()
	res.Params["generator_nofile"] = fmt.Sprintf("%d (hard %d)", soft, hard)
	if rerr != nil {
		res.Notes = append(res.Notes, "raising RLIMIT_NOFILE: "+rerr.Error())
	}
	if r.pid > 0 {
		res.Params["server_nofile"] = r.before.NoFile
		if r.before.NoFile > 0 && r.before.NoFile < int64(p.Idle)+16 {
			res.Problems = append(res.Problems, fmt.Sprintf("the server's open-files limit %d is below %d idle connections", r.before.NoFile, p.Idle))
		}
	}
	t0 := Now()
	closeIdle, err := id.OpenIdle(ctx, p.Idle)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return r.finish(ctx, 0, nil), nil
	}
	res.setRate("conns/s", p.Idle, Now()-t0)
	var with ProcStats
	if r.pid > 0 {
		with, _ = ReadProc(r.pid)
	}
	time.Sleep(p.Hold)
	if r.pid > 0 {
		end, _ := ReadProc(r.pid)
		res.Extra = map[string]float64{
			"rss_kib_with_idle":         float64(end.RSSKiB),
			"rss_bytes_per_conn":        float64(with.RSSKiB-r.before.RSSKiB) * 1024 / float64(p.Idle),
			"cpu_seconds_during_hold":   end.CPUSeconds - with.CPUSeconds,
			"cpu_percent_during_hold":   100 * (end.CPUSeconds - with.CPUSeconds) / p.Hold.Seconds(),
			"cpu_seconds_while_opening": with.CPUSeconds - r.before.CPUSeconds,
		}
	}
	if st, ok := tg.(interface {
		sessions(context.Context) (uint64, error)
	}); ok {
		s, err := st.sessions(ctx)
		switch {
		case err != nil:
			res.Problems = append(res.Problems, "stats: "+err.Error())
		case s < uint64(p.Idle):
			res.Problems = append(res.Problems, fmt.Sprintf("server reports %d sessions, want at least %d", s, p.Idle))
		default:
			res.Params["server_sessions"] = s
		}
	}
	closeIdle()
	return r.finish(ctx, 0, nil), nil
}

// HoldTimers adds N one-shot timers without data, due uniformly between
// one hour and one week from now (so none fires during the run), holds them
// for Hold, and reports the server's memory with them (RSS and its peak,
// per timer) and its CPU while it only holds them: an idle server must cost
// next to nothing however many timers it keeps. The timers are cleared at
// the end; any delivery fails the run.
//
// For an in-process target (afterfunc) the process measured is the
// generator's own, idle during the hold.
func HoldTimers(ctx context.Context, tg Target, p Params) (*Result, error) {
	r, err := start(ctx, "hold", tg, p, 0, 0)
	if err != nil {
		return nil, err
	}
	res := r.res
	pid, before := r.pid, r.before
	if _, ok := tg.(*AfterFuncTarget); ok {
		pid = os.Getpid()
		before, _ = ReadProc(pid)
		res.Notes = append(res.Notes, "in-process target: RSS and CPU are the generator process's own")
	}
	const hour, week = int64(time.Hour), int64(7 * 24 * time.Hour)
	now := Now()
	per := make([][]Timer, p.Conns)
	for i := range p.N {
		w := i % p.Conns
		due := now + hour + (week-hour)/int64(max(p.N, 1))*int64(i)
		per[w] = append(per[w], Timer{Receiver: receiverOf(i, p.Conns), Tid: uint64(i + 1), Due: due, Repeat: 1})
	}
	t0 := Now()
	ar, err := addAll(ctx, tg, per)
	res.setRate("adds/s", ar.OK, Now()-t0)
	res.Scheduled, res.AddErrors = int64(ar.OK), ar.Errors
	if ar.OK != p.N {
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d timers added", ar.OK, p.N))
	}
	per = nil
	res.Params["n"], res.Params["conns"], res.Params["hold"] = p.N, p.Conns, p.Hold.String()
	if err == nil && pid > 0 {
		time.Sleep(time.Second) // let the adds' own work settle
		with, _ := ReadProc(pid)
		time.Sleep(p.Hold)
		end, _ := ReadProc(pid)
		res.Extra = map[string]float64{
			"rss_mib_with_timers":     float64(with.RSSKiB) / 1024,
			"peak_rss_mib":            float64(end.HWMKiB) / 1024,
			"rss_bytes_per_timer":     float64(with.RSSKiB-before.RSSKiB) * 1024 / float64(max(p.N, 1)),
			"cpu_seconds_during_hold": end.CPUSeconds - with.CPUSeconds,
			"cpu_percent_during_hold": 100 * (end.CPUSeconds - with.CPUSeconds) / p.Hold.Seconds(),
			"cpu_seconds_adding":      with.CPUSeconds - before.CPUSeconds,
		}
	} else if err == nil {
		time.Sleep(p.Hold)
	}
	return r.finish(ctx, 0, nil), err
}

// FastForwardCost: freeze the clock, add N timers spread over Span ticks,
// fast-forward Span ticks at once, and time it: the fast-forward reply (the
// server has sent every firing) and the last firing received.
func FastForwardCost(ctx context.Context, tg Target, p Params) (*Result, error) {
	v, ok := tg.(Virtual)
	if !ok {
		return nil, ErrUnsupported
	}
	r, err := start(ctx, "ff", tg, p, p.N, 0)
	if err != nil {
		return nil, err
	}
	r.c.virtual = true
	now, err := v.Freeze(ctx)
	if err != nil {
		return r.finish(ctx, 0, nil), err
	}
	span := max(p.Span, 1)
	per := make([][]Timer, p.Conns)
	for i := range p.N {
		w := i % p.Conns
		per[w] = append(per[w], Timer{Receiver: receiverOf(i, p.Conns), Tid: uint64(i + 1), AtTick: now + 1 + uint64(i)%span, Repeat: 1, Data: dueData(0)})
	}
	ar, err := addAll(ctx, tg, per)
	r.res.Scheduled, r.res.AddErrors = int64(ar.OK), ar.Errors
	if err == nil {
		t0 := Now()
		var fired uint64
		fired, err = v.FastForward(ctx, span)
		t1 := Now()
		r.wait(int64(p.N), 0, t1+int64(p.Grace))
		r.res.setRate("fires/s", int(r.c.delivered.Load()), r.c.lastRecv.Load()-t0)
		r.res.Extra = map[string]float64{"ff_reply_seconds": float64(t1-t0) / 1e9, "server_fired": float64(fired), "last_receipt_seconds": float64(r.c.lastRecv.Load()-t0) / 1e9}
		if fired != uint64(p.N) {
			r.res.Problems = append(r.res.Problems, fmt.Sprintf("server says %d fired, want %d", fired, p.N))
		}
	}
	if rerr := v.Resume(ctx); err == nil {
		err = rerr
	}
	r.res.Params["n"], r.res.Params["conns"], r.res.Params["span_ticks"] = p.N, p.Conns, span
	return r.finish(ctx, int64(p.N), func(int) int { return 1 }), err
}
