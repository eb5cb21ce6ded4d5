package loadtest

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"
)

// ScaleReport is what Scale measured.
type ScaleReport struct {
	N, Receivers     int
	Rate             int
	Duration         time.Duration
	SnapshotInterval time.Duration

	// AddsPerSec over all N; AddsPerSecFirst over the first million (all
	// N when fewer): the bar is the whole run at ≥ 0.8× the first.
	AddsPerSec, AddsPerSecFirst float64
	AddBegan, AddEnded          time.Time
	FireBegan, FireEnded        time.Time

	// RSS of the server: empty, with the N timers, after the firing plan,
	// its peak (VmHWM), and after the restart.
	RSSEmptyMiB, RSSAddedMiB, RSSFiredMiB, HWMMiB, RSSRecoveredMiB float64
	// RSSReturnedMiB is the RSS once the restarted server returned what
	// its recovery let go (ReturnedLogged, in ReturnedTook), or 30 s
	// after the restart when it logged no such return.
	RSSReturnedMiB float64
	ReturnedLogged bool
	ReturnedTook   time.Duration

	// The first snapshot of all N timers begun after the adds.
	SnapshotBytes  int64
	SnapshotTimers int

	Pauses map[string]PauseSummary // by phase: adding, firing, other

	// The restart after SIGKILL: exec to accepting connections, and the
	// server's "state recovered" line.
	RecoveryReady   time.Duration
	RecoveredTook   time.Duration
	TimersRecovered int
	RecordsReplayed int
	FiringsReplayed int

	Firing *Result // the firing plan (the lateness scenario)
	// Alternates: with ScaleParams.Alternate, the plan with and without
	// snapshots at each priority, round by round (scale_alt.go).
	Alternates []AltPlan
	// With Quiet: the same plan with no snapshot being written, the loop's
	// turns while stats and the operator pages were asked for, and the
	// idle CPU (% of a core) over IdleFor.
	FiringQuiet *Result
	Probes      []TurnProbe
	IdleCPU     float64
	IdleFor     time.Duration
	Redis       *RedisMemory

	Problems []string
}

// PauseSummary sums up the loop pauses logged in one phase.
type PauseSummary struct {
	Count    int
	P50, Max time.Duration
}

// Failed implements ToolReport.
func (r *ScaleReport) Failed() bool { return len(r.Problems) > 0 }

// Print implements ToolReport.
func (r *ScaleReport) Print(w io.Writer) {
	n := float64(max(r.N, 1))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(f, a...)) }
	row("timers", "%d over %d receivers", r.N, r.Receivers)
	row("adds/s", "%.0f (the first %d: %.0f; ratio %.2f)", r.AddsPerSec, min(r.N, 1_000_000), r.AddsPerSecFirst, r.AddsPerSec/max(r.AddsPerSecFirst, 1))
	row("RSS", "empty %.1f MiB, with the timers %.1f MiB, after firing %.1f MiB, peak %.1f MiB", r.RSSEmptyMiB, r.RSSAddedMiB, r.RSSFiredMiB, r.HWMMiB)
	row("RSS per timer", "%.1f bytes (with the timers), %.1f bytes over the empty server", r.RSSAddedMiB*(1<<20)/n, (r.RSSAddedMiB-r.RSSEmptyMiB)*(1<<20)/n)
	if r.SnapshotTimers > 0 {
		row("snapshot", "%d bytes of %d timers: %.1f bytes per timer", r.SnapshotBytes, r.SnapshotTimers, float64(r.SnapshotBytes)/float64(r.SnapshotTimers))
	}
	for _, ph := range []string{"adding", "firing", "other"} {
		if p, ok := r.Pauses[ph]; ok {
			row("loop pauses "+ph, "%d, median %v, max %v", p.Count, p.P50, p.Max)
		} else {
			row("loop pauses "+ph, "none logged")
		}
	}
	row("recovery", "%v exec to accepting connections (server: took %v; %d timers, %d records and %d firings replayed); RSS %.1f MiB",
		r.RecoveryReady.Round(time.Millisecond), r.RecoveredTook, r.TimersRecovered, r.RecordsReplayed, r.FiringsReplayed, r.RSSRecoveredMiB)
	if r.ReturnedLogged {
		row("memory returned", "after the recovery in %v: RSS %.1f MiB, %.1f bytes per timer", r.ReturnedTook, r.RSSReturnedMiB, r.RSSReturnedMiB*(1<<20)/n)
	} else if r.SnapshotBytes >= returnFrom {
		row("memory returned", "not logged; RSS 30 s after the restart %.1f MiB, %.1f bytes per timer", r.RSSReturnedMiB, r.RSSReturnedMiB*(1<<20)/n)
	}
	if f := r.Firing; f != nil {
		row("firing", "%d/s for %v: %d of %d delivered, %d early, %d duplicates", r.Rate, r.Duration, f.Delivered, f.Expected, f.Early, f.Duplicates)
		if l := f.Lateness; l != nil {
			row("fire lateness", "p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms", ms(l.P50), ms(l.P99), ms(l.P999), ms(l.Max))
		}
		if l := f.TickLateness; l != nil {
			row("after its tick", "p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms", ms(l.P50), ms(l.P99), ms(l.P999), ms(l.Max))
		}
	}
	if f := r.FiringQuiet; f != nil {
		row("firing, no snapshot", "%d/s for %v: %d of %d delivered, %d early, %d duplicates", r.Rate, r.Duration, f.Delivered, f.Expected, f.Early, f.Duplicates)
		if l := f.Lateness; l != nil {
			row("fire lateness", "p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms", ms(l.P50), ms(l.P99), ms(l.P999), ms(l.Max))
		}
		if l := f.TickLateness; l != nil {
			row("after its tick", "p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms", ms(l.P50), ms(l.P99), ms(l.P999), ms(l.Max))
		}
	}
	for _, pr := range r.Probes {
		row("loop turns: "+pr.What, "%d requests: %d turns, the longest ≤ %g ms (its bucket); round trip max %v",
			pr.Requests, pr.Turns, pr.LongestTurnLE*1000, pr.RoundTripMax.Round(time.Microsecond))
	}
	if r.IdleFor > 0 {
		row("idle CPU", "%.4f%% of a core over %v", r.IdleCPU, r.IdleFor)
	}
	if m := r.Redis; m != nil {
		row("redis", "%d ZSET members at %.0f/s: used_memory %.1f MiB over the empty key, %.1f bytes per member; RSS %.1f MiB",
			m.Members, m.AddsPerSec, float64(m.UsedAfter-m.UsedBefore)/(1<<20), m.BytesPerMember(), float64(m.RSSAfter)/(1<<20))
	}
	for _, p := range r.Problems {
		row("PROBLEM", "%s", p)
	}
	tw.Flush()
	printAlternates(w, r.Alternates)
}

// readRecovered reads the last "state recovered" line of the log.
func (r *ScaleReport) readRecovered(lb *logBuffer) {
	ls := lb.lines("persistence on: state recovered")
	if len(ls) == 0 {
		r.Problems = append(r.Problems, `no "state recovered" line in the server's log`)
		return
	}
	l := ls[len(ls)-1]
	r.RecoveredTook, _ = time.ParseDuration(l["took"])
	r.TimersRecovered, _ = strconv.Atoi(l["timers"])
	r.RecordsReplayed, _ = strconv.Atoi(l["records_replayed"])
	r.FiringsReplayed, _ = strconv.Atoi(l["firings_replayed"])
}

// loopPauses sums up every log line with a loop_pause, by the phase it
// began in (logBegan): adding, firing or other.
func loopPauses(lb *logBuffer, r *ScaleReport) map[string]PauseSummary {
	by := map[string][]time.Duration{}
	for _, l := range lb.linesWith("loop_pause=") {
		v, ok := l["loop_pause"]
		if !ok {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			continue
		}
		at := logBegan(l)
		ph := "other"
		switch {
		case !at.Before(r.AddBegan) && !at.After(r.AddEnded):
			ph = "adding"
		case !at.Before(r.FireBegan) && !at.After(r.FireEnded):
			ph = "firing"
		}
		by[ph] = append(by[ph], d)
	}
	out := map[string]PauseSummary{}
	for ph, ds := range by {
		slices.Sort(ds)
		out[ph] = PauseSummary{Count: len(ds), P50: ds[len(ds)/2], Max: ds[len(ds)-1]}
	}
	return out
}

// addProgress logs the adds done every tenth of the way. Safe from any goroutine.
type addProgress struct {
	mu      sync.Mutex
	n, done int
	next    int
	logf    func(string, ...any)
	began   time.Time
}

func newAddProgress(n int, logf func(string, ...any)) *addProgress {
	return &addProgress{n: n, next: max(n/10, 1), logf: logf, began: time.Now()}
}

// add notes k more adds acknowledged and returns the total.
func (a *addProgress) add(k int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done += k
	if a.done >= a.next && a.done < a.n {
		el := time.Since(a.began)
		a.logf("scale: %d of %d added in %v (%.2fM/s)", a.done, a.n, el.Round(time.Millisecond), float64(a.done)/el.Seconds()/1e6)
		a.next += max(a.n/10, 1)
	}
	return a.done
}
