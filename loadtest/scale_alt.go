package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// AltPlan is one pair of firing plans of Scale with Alternate, run on the
// same server one after the other: On with snapshots written at
// snapshot.priority Priority, Off with none being written.
type AltPlan struct {
	Round    int
	Priority string
	On, Off  *Result
	// Snapshots is how many snapshots were being written at some point
	// of the On plan (begun before its end, written after its start).
	Snapshots int
	// Load is /proc/loadavg's 1-minute figure before On, between the
	// two, and after Off ("" where it could not be read).
	Load [3]string
	// OtherOn and OtherOff are the CPU the machine spent on anything but
	// the server and this process during each plan, in cores (-1: not
	// read): the other work the plan competed with, which the load
	// average shows only a minute late.
	OtherOn, OtherOff float64
	// Waited is how long the two plans waited for the other processes to
	// quieten (ScaleParams.QuietBelow); NotQuiet that one of them ran
	// after QuietWait without.
	Waited   time.Duration
	NotQuiet bool
	// In and Out split On's deliveries by whether their due fell while a
	// snapshot was being written (from its start to its "snapshot
	// written" line) or not: lateness and lateness after the tick, µs.
	// Interleaved within one plan, they see the same other work.
	In, Out [2]*hdrhistogram.Histogram
}

// P99Diff is On's fire lateness p99 less Off's, and the same after the
// tick, µs; ok is false when either plan has no lateness.
func (a AltPlan) P99Diff() (late, tick int64, ok bool) {
	if a.On == nil || a.Off == nil || a.On.Lateness == nil || a.Off.Lateness == nil ||
		a.On.TickLateness == nil || a.Off.TickLateness == nil {
		return 0, 0, false
	}
	return a.On.Lateness.P99 - a.Off.Lateness.P99, a.On.TickLateness.P99 - a.Off.TickLateness.P99, true
}

// alternate runs, Rounds times, for each priority of Alternate: the firing
// plan with snapshots every SnapshotInterval at that snapshot.priority
// (the config file rewritten, SIGHUP), then with snapshots off (SIGHUP,
// and a wait for the one being written), into rep.Alternates. It leaves
// the config file as Scale wrote it.
func (p *ScaleParams) alternate(ctx context.Context, s *Spawned, lb *logBuffer, conf string, rep *ScaleReport) error {
	defer func() {
		_ = os.WriteFile(conf, []byte(p.config(orNone(p.SnapshotInterval), p.SnapshotPriority)), 0o600)
	}()
	tg := &TickwheelTarget{Addr: s.Addr, Token: p.Token, Pid: s.PID()}
	lp := DefaultParams()
	lp.Rate, lp.Duration, lp.Lead, lp.Conns = p.Rate, p.Duration, p.Lead, min(p.Conns, 8)
	lp.KeepSamples = true
	for round := 1; round <= max(p.Rounds, 1); round++ {
		for _, prio := range p.Alternate {
			a := AltPlan{Round: round, Priority: prio}
			if err := p.reload(ctx, s, lb, conf, p.config(orNone(p.SnapshotInterval), prio)); err != nil {
				return err
			}
			p.waitQuiet(ctx, s.PID(), &a)
			a.Load[0] = loadAvg()
			began := time.Now()
			other := otherCPU(s.PID())
			var err error
			if a.On, err = Lateness(ctx, tg, lp); err != nil {
				return fmt.Errorf("scale: round %d, %s, with snapshots: %w", round, prio, err)
			}
			a.OtherOn = other()
			a.Snapshots = snapshotsDuring(lb, began, time.Now())
			a.Load[1] = loadAvg()
			if err := p.reload(ctx, s, lb, conf, p.config("1000000h", prio)); err != nil {
				return err
			}
			if err := waitSnapshotEnd(ctx, lb); err != nil {
				return err
			}
			a.In, a.Out = splitBySnapshot(a.On.Samples, snapshotWindows(lb))
			a.On.Samples = nil
			p.waitQuiet(ctx, s.PID(), &a)
			other = otherCPU(s.PID())
			if a.Off, err = Lateness(ctx, tg, lp); err != nil {
				return fmt.Errorf("scale: round %d, %s, without snapshots: %w", round, prio, err)
			}
			a.Off.Samples = nil
			a.OtherOff = other()
			a.Load[2] = loadAvg()
			late, tick, _ := a.P99Diff()
			p.Logf("scale: round %d, priority %s: %d snapshots; p99 %+.3f ms, after the tick %+.3f ms; load %s; other CPU %.2f / %.2f; waited %v for quiet (not quiet: %v)",
				round, prio, a.Snapshots, float64(late)/1000, float64(tick)/1000, strings.Join(a.Load[:], " "), a.OtherOn, a.OtherOff,
				a.Waited.Round(time.Second), a.NotQuiet)
			rep.Alternates = append(rep.Alternates, a)
		}
	}
	return nil
}

// snapWindow is a snapshot's writing, from its start to its end.
type snapWindow struct{ from, to time.Time }

// snapshotWindows are the snapshots written in the log so far.
func snapshotWindows(lb *logBuffer) []snapWindow {
	var out []snapWindow
	for _, l := range lb.lines("snapshot written") {
		if at, err := time.Parse(time.RFC3339Nano, l["time"]); err == nil {
			out = append(out, snapWindow{logBegan(l), at})
		}
	}
	return out
}

// splitBySnapshot records each sample's lateness and lateness after its
// tick (µs) into in when its due fell in one of wins, else into out.
func splitBySnapshot(samples []Sample, wins []snapWindow) (in, out [2]*hdrhistogram.Histogram) {
	for k := range 2 {
		in[k], out[k] = hdrhistogram.New(histMin, histMax, histSig), hdrhistogram.New(histMin, histMax, histSig)
	}
	for _, sm := range samples {
		due := WallOf(sm.Due)
		h := out
		for _, w := range wins {
			if !due.Before(w.from) && !due.After(w.to) {
				h = in
				break
			}
		}
		record(h[0], sm.Late)
		record(h[1], sm.OnTick)
	}
	return in, out
}

// waitQuiet waits, with QuietBelow set, until the machine spends under
// QuietBelow cores on processes other than the server and this one over
// 2 s, for up to QuietWait (then a.NotQuiet), adding the wait to
// a.Waited.
func (p *ScaleParams) waitQuiet(ctx context.Context, pid int, a *AltPlan) {
	if p.QuietBelow <= 0 {
		return
	}
	began := time.Now()
	defer func() { a.Waited += time.Since(began) }()
	for {
		other := otherCPU(pid)
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return
		}
		if o := other(); o >= 0 && o < p.QuietBelow {
			return
		}
		if time.Since(began) >= p.QuietWait {
			a.NotQuiet = true
			return
		}
	}
}

// reload writes config into the server's config file, sends it SIGHUP
// and waits for its "config reloaded" line.
func (p *ScaleParams) reload(ctx context.Context, s *Spawned, lb *logBuffer, conf, config string) error {
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		return err
	}
	reloads := len(lb.lines("config reloaded"))
	if err := s.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return err
	}
	for len(lb.lines("config reloaded")) == reloads {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// longestSnapshot is the longest "snapshot written" took in the log so far.
func longestSnapshot(lb *logBuffer) time.Duration {
	var longest time.Duration
	for _, l := range lb.lines("snapshot written") {
		took, _ := time.ParseDuration(l["took"])
		longest = max(longest, took)
	}
	return longest
}

// waitSnapshotEnd waits long enough for a snapshot begun before snapshots
// were turned off to have ended: about twice the longest written so far.
func waitSnapshotEnd(ctx context.Context, lb *logBuffer) error {
	select {
	case <-time.After(2*longestSnapshot(lb) + 2*time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// snapshotsDuring counts the snapshots written in the log that were being
// written at some point between from and to.
func snapshotsDuring(lb *logBuffer, from, to time.Time) int {
	n := 0
	for _, l := range lb.lines("snapshot written") {
		at, err := time.Parse(time.RFC3339Nano, l["time"])
		if err == nil && at.After(from) && logBegan(l).Before(to) {
			n++
		}
	}
	return n
}

// loadAvg is the machine's 1-minute load average ("" off Linux).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// otherCPU starts counting the CPU time the machine spends on anything
// but process pid and this one (/proc/stat's busy time less both
// processes' utime and stime, which keep the time of threads that ended:
// an idle-priority encoder's ends with its snapshot); the function it
// returns gives it since, in cores (-1 when something could not be read).
// Kernel threads count as other (the snapshot's writeback among them).
func otherCPU(pid int) func() float64 {
	procs := func() (float64, error) {
		srv, err1 := ReadProc(pid)
		gen, err2 := ReadProc(os.Getpid())
		return srv.CPUSeconds + gen.CPUSeconds, errors.Join(err1, err2)
	}
	t0, busy0 := time.Now(), machineBusy()
	ours0, err0 := procs()
	return func() float64 {
		busy1 := machineBusy()
		ours1, err1 := procs()
		if busy0 < 0 || busy1 < 0 || err0 != nil || err1 != nil {
			return -1
		}
		other := time.Duration(busy1-busy0).Seconds() - (ours1 - ours0)
		return max(other, 0) / time.Since(t0).Seconds()
	}
}

// machineBusy is the time every CPU spent busy since boot, ns, from
// /proc/stat's first line (user, nice, system, irq, softirq, steal: not
// idle or iowait, which it counts in clkTck units); -1 when it cannot be read.
func machineBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return -1
		}
		ticks += v
	}
	return ticks * int64(time.Second) / clkTck
}

// printAlternates writes rep.Alternates as a table, then each priority's
// median difference, and its plans' deliveries pooled and split by
// whether a snapshot was being written at their due (AltPlan.In, Out).
func printAlternates(w io.Writer, alts []AltPlan) {
	if len(alts) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "round\tpriority\tsnapshots\tp99 on / off (ms)\tdifference\tafter the tick on / off\tdifference\t"+
		"in / out of a snapshot (ms)\tload\tother CPU on / off\twaited for quiet")
	diffs := map[string][]int64{}
	pooled := map[string]*[2][2]*hdrhistogram.Histogram{} // priority -> in, out -> late, tick
	var order []string
	for _, a := range alts {
		if _, seen := pooled[a.Priority]; !seen {
			order = append(order, a.Priority)
			pooled[a.Priority] = &[2][2]*hdrhistogram.Histogram{}
			for i := range 2 {
				for k := range 2 {
					pooled[a.Priority][i][k] = hdrhistogram.New(histMin, histMax, histSig)
				}
			}
		}
		split := "-"
		if a.In[0] != nil {
			split = fmt.Sprintf("%s / %s", ms(a.In[0].ValueAtQuantile(99)), ms(a.Out[0].ValueAtQuantile(99)))
			for k := range 2 {
				pooled[a.Priority][0][k].Merge(a.In[k])
				pooled[a.Priority][1][k].Merge(a.Out[k])
			}
		}
		rest := fmt.Sprintf("%s\t%s\t%.2f / %.2f\t%s", split, strings.Join(a.Load[:], " "), a.OtherOn, a.OtherOff, a.waited())
		late, tick, ok := a.P99Diff()
		if !ok {
			fmt.Fprintf(tw, "%d\t%s\t%d\tno lateness\t\t\t\t%s\n", a.Round, a.Priority, a.Snapshots, rest)
			continue
		}
		diffs[a.Priority] = append(diffs[a.Priority], late)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s / %s\t%+.3f\t%s / %s\t%+.3f\t%s\n", a.Round, a.Priority, a.Snapshots,
			ms(a.On.Lateness.P99), ms(a.Off.Lateness.P99), float64(late)/1000,
			ms(a.On.TickLateness.P99), ms(a.Off.TickLateness.P99), float64(tick)/1000, rest)
	}
	for _, prio := range order {
		if d := slices.Clone(diffs[prio]); len(d) > 0 {
			slices.Sort(d)
			fmt.Fprintf(tw, "median\t%s\t\t\t%+.3f\t(of %d)\t\t\t\t\t\n", prio, float64(medianOf(d))/1000, len(d))
		}
	}
	tw.Flush()
	for _, prio := range order {
		h := pooled[prio]
		if h[0][0].TotalCount() == 0 || h[1][0].TotalCount() == 0 {
			continue
		}
		in, out := h[0][0].ValueAtQuantile(99), h[1][0].ValueAtQuantile(99)
		tin, tout := h[0][1].ValueAtQuantile(99), h[1][1].ValueAtQuantile(99)
		fmt.Fprintf(w, "%s, the plans with snapshots pooled: p99 with a snapshot being written %s ms (%d fires), without %s ms (%d): %+.3f ms; after the tick %s / %s: %+.3f ms\n",
			prio, ms(in), h[0][0].TotalCount(), ms(out), h[1][0].TotalCount(), float64(in-out)/1000, ms(tin), ms(tout), float64(tin-tout)/1000)
	}
}

// waited is Waited, marked when a plan ran without quiet.
func (a AltPlan) waited() string {
	w := a.Waited.Round(time.Second).String()
	if a.NotQuiet {
		w += " (not quiet)"
	}
	return w
}

// medianOf is the median of sorted d (the mean of the middle two when
// their number is even).
func medianOf(d []int64) int64 {
	if len(d)%2 == 1 {
		return d[len(d)/2]
	}
	return (d[len(d)/2-1] + d[len(d)/2]) / 2
}
