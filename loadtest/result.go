package loadtest

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Result is what a scenario measured and checked.
type Result struct {
	Scenario, Target string
	Params           map[string]any

	Rate       float64 // the scenario's throughput, in Unit
	Unit       string
	RateSecs   float64            // the interval the rate is over, seconds
	RateEvents int                // events counted in it
	Extra      map[string]float64 `json:",omitempty"`

	// Counts. Scheduled: firings the target accepted; Expected: firings that
	// should be delivered (scheduled minus cancelled). The invariant is
	// Delivered == Expected and every other count 0.
	Scheduled, Expected, Delivered int64
	Cancelled                      int64 `json:",omitempty"`
	Duplicates, Early, Missing     int64
	CancelledFired, Unknown        int64
	AddErrors                      map[string]int `json:",omitempty"`

	// Lateness: receipt − intended due, µs. TickLateness, for a ticked
	// target: receipt − the instant its tick is processed; for beanstalkd:
	// receipt − the instant its whole-second delay ends (quantisation
	// removed: the server's own delay).
	Lateness     *Latency `json:",omitempty"`
	TickLateness *Latency `json:",omitempty"`
	// SocketLateness: the kernel's receive stamp of the bytes that carried
	// each firing − its intended due, µs (targets that push firings over a
	// TCP connection, on Linux): Lateness without the generator's own delay
	// between the bytes' arrival and its read.
	SocketLateness *Latency `json:",omitempty"`
	// SocketTickLateness, for a ticked target with socket stamps: the
	// stamp − the instant its tick is processed, the server's own delay
	// from its tick's boundary to the bytes reaching the client's socket
	// (loadtest/cmd/wakefloor measures this machine's floor for it).
	SocketTickLateness *Latency `json:",omitempty"`
	// Samples: with Params.KeepSamples, every delivery's due and lateness.
	Samples []Sample `json:"-"`

	Server *ServerStats `json:",omitempty"`
	// Counted: the target's own firing and drop counts over the scenario
	// (Counter targets). The invariant: Fired == Delivered, Dropped == 0.
	Counted *Counters `json:",omitempty"`

	Failed   bool
	Problems []string `json:",omitempty"` // why it failed
	Notes    []string `json:",omitempty"`
}

// ServerStats is the spawned server's CPU and memory over the scenario.
type ServerStats struct {
	PID           int
	Before, After ProcStats
	CPUSeconds    float64 // After − Before
}

func (r *Result) setRate(unit string, events int, ns int64) {
	r.Unit, r.RateEvents, r.RateSecs = unit, events, float64(ns)/1e9
	if ns > 0 {
		r.Rate = float64(events) / r.RateSecs
	}
}

// check applies the invariant and sets Failed.
func (r *Result) check() {
	bad := func(cond bool, format string, args ...any) {
		if cond {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		}
	}
	bad(r.Delivered != r.Expected, "delivered %d, want %d", r.Delivered, r.Expected)
	bad(r.Duplicates != 0, "%d duplicate deliveries", r.Duplicates)
	bad(r.Early != 0, "%d deliveries before their due", r.Early)
	bad(r.Missing != 0, "%d expected firings missing", r.Missing)
	bad(r.CancelledFired != 0, "%d cancelled timers fired", r.CancelledFired)
	bad(r.Unknown != 0, "%d unknown deliveries", r.Unknown)
	n := 0
	for _, v := range r.AddErrors {
		n += v
	}
	bad(n != 0, "add errors: %v", r.AddErrors)
	if c := r.Counted; c != nil {
		bad(c.Fired != uint64(r.Delivered), "the server fired %d, the generator received %d", c.Fired, r.Delivered)
		bad(c.Dropped != 0, "the server dropped %d events", c.Dropped)
	}
	r.Failed = len(r.Problems) > 0
}

func ms(us int64) string { return fmt.Sprintf("%.3f", float64(us)/1000) }

// WriteTable writes results as a human table, then per-result details.
func WriteTable(w io.Writer, rs []*Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttarget\tthroughput\tunit\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tsched\tdeliv\tdup\tearly\tmissing\tcxl-fired\tstatus\t")
	for _, r := range rs {
		lat := []string{"-", "-", "-", "-", "-"}
		if l := r.Lateness; l != nil {
			lat = []string{ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max)}
		}
		status := "ok"
		if r.Failed {
			status = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Scenario, r.Target, r.Rate, r.Unit,
			strings.Join(lat, "\t"), r.Scheduled, r.Delivered, r.Duplicates, r.Early, r.Missing, r.CancelledFired, status)
	}
	tw.Flush()
	for _, r := range rs {
		fmt.Fprintf(w, "\n%s/%s: %d %s in %.3fs", r.Scenario, r.Target, r.RateEvents, strings.TrimSuffix(r.Unit, "/s"), r.RateSecs)
		keys := make([]string, 0, len(r.Params))
		for k := range r.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%v", k, r.Params[k])
		}
		fmt.Fprintln(w)
		if l := r.Lateness; l != nil {
			fmt.Fprintf(w, "  lateness vs intended due: p50 %s p99 %s max %s ms, min %s ms; %.2f%% within %s ms\n",
				ms(l.P50), ms(l.P99), ms(l.Max), ms(l.Min), 100*l.WithinTarget, ms(l.TargetUs))
		}
		if l := r.SocketLateness; l != nil {
			fmt.Fprintf(w, "  lateness at the socket (kernel receive stamp): p50 %s p99 %s p99.9 %s max %s ms, min %s ms\n",
				ms(l.P50), ms(l.P99), ms(l.P999), ms(l.Max), ms(l.Min))
		}
		if l := r.SocketTickLateness; l != nil {
			fmt.Fprintf(w, "  at the socket vs its tick (the server's own delay): p50 %s p90 %s p99 %s p99.9 %s max %s ms\n", ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max))
		}
		if l := r.TickLateness; l != nil {
			fmt.Fprintf(w, "  lateness vs its tick or rounded delay (quantisation removed): p50 %s p90 %s p99 %s p99.9 %s max %s ms\n", ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max))
		}
		if len(r.Extra) > 0 {
			keys := make([]string, 0, len(r.Extra))
			for k := range r.Extra {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			fmt.Fprint(w, " ")
			for _, k := range keys {
				fmt.Fprintf(w, " %s=%.4g", k, r.Extra[k])
			}
			fmt.Fprintln(w)
		}
		if s := r.Server; s != nil {
			fmt.Fprintf(w, "  server pid %d: cpu %.2fs (%.2f→%.2f), rss %d→%d KiB\n", s.PID, s.CPUSeconds, s.Before.CPUSeconds, s.After.CPUSeconds, s.Before.RSSKiB, s.After.RSSKiB)
		}
		if c := r.Counted; c != nil {
			fmt.Fprintf(w, "  server counters: fired %d, dropped %d\n", c.Fired, c.Dropped)
		}
		if r.Cancelled > 0 {
			fmt.Fprintf(w, "  cancelled %d, expected deliveries %d\n", r.Cancelled, r.Expected)
		}
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  FAILED: %s\n", p)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
}
