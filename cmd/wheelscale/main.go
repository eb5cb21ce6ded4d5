// Command wheelscale measures the wheel alone at a large number of timers:
// the rate of adds, the memory per timer (the process's RSS), and the time
// loop turns take while a snapshot is encoded on another goroutine, against
// the same turns without one. It drives the wheel as the server's loop
// does: a turn every tick (10 ms of wall time), each firing the timers due
// on one tick and adding as many (steady state) or adding many (a growing
// wheel); the snapshot is encoded in 64 KiB pieces with a yield between
// them, as server/snapshot.go writes one.
//
//	go run ./cmd/wheelscale -n 10000000
//
// Times are the CPU time of the loop's thread (CLOCK_THREAD_CPUTIME_ID), so
// that other processes on a shared machine do not count. It prints
// key=value figures, a line for the adds and one per phase. With -during,
// snapshots are taken one after another until that many turns have run
// while one was written (so that the turns that move a level-1 slot down,
// one in 100, fall inside one); the figures of the snapshot are the last's,
// the Freeze the longest. Only the wheel's public API is
// used, so the same program measures an older wheel (docs/BENCHMARKS.md).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/wheel"
)

func main() {
	n := flag.Int("n", 1_000_000, "timers to add")
	receivers := flag.Int("receivers", 10_000, "receivers the timers are spread over")
	fires := flag.Int("fires", 500, "timers due per tick (500: 50k fires/s at a 10 ms tick)")
	grow := flag.Int("grow", 10_000, "timers added per turn while the wheel grows")
	turns := flag.Int("turns", 200, "turns measured without a snapshot, per phase")
	tick := flag.Duration("tick", 10*time.Millisecond, "wall time per turn")
	phases := flag.String("phases", "steady,growing", "the phases to measure, in order")
	during := flag.Int("during", 0, "turns to measure while snapshots are written, one after another (0: while one is)")
	memDetail := flag.Bool("mem", false, "after the adds, print where the process's memory goes: the runtime's memory classes and /proc/self/status, per timer")
	heapProfile := flag.String("heapprofile", "", "after the adds, write a heap profile (pprof) to this file")
	flag.DurationVar(&slowTurn, "slow", 0, "print each turn (and Freeze) of at least this much CPU: its wall time, its longest wheel call, the collections that ran in it (0: none)")
	tracePath := flag.String("trace", "", "write an execution trace (runtime/trace) of the phases to this file")
	flag.Parse()
	memReport = *memDetail
	heapProfilePath = *heapProfile
	if *tracePath != "" {
		stop, err := startTrace(*tracePath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wheelscale:", err)
			os.Exit(1)
		}
		defer stop()
	}
	if err := run(*n, *receivers, *fires, *grow, *turns, *during, *tick, strings.Split(*phases, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "wheelscale:", err)
		os.Exit(1)
	}
}

// driver is the wheel and what the turns add to it.
type driver struct {
	w         *wheel.Wheel
	rng       *rand.Rand
	receivers uint64
	span      uint64 // ticks the timers' due ticks spread over
	next      uint64 // the next tid
	fired     int
	call      longest // the longest wheel call of the turn (with -slow)
}

func (d *driver) add(after uint64) error {
	d.next++
	if slowTurn == 0 {
		return d.w.Add(wheel.Key{Receiver: d.next % d.receivers, Tid: d.next}, wheel.Spec{After: after, Repeat: 1})
	}
	t0 := time.Now()
	err := d.w.Add(wheel.Key{Receiver: d.next % d.receivers, Tid: d.next}, wheel.Spec{After: after, Repeat: 1})
	d.call.note(time.Since(t0))
	return err
}

// steadyTurn fires the timers due on the next tick and adds as many.
func (d *driver) steadyTurn() error {
	before := d.fired
	t0 := time.Now()
	d.w.Advance(d.w.Now()+1, 0, func(*wheel.Fire) { d.fired++ })
	if slowTurn != 0 {
		d.call.note(time.Since(t0))
	}
	for range d.fired - before {
		if err := d.add(d.span); err != nil {
			return err
		}
	}
	return nil
}

// growTurn adds k timers.
func (d *driver) growTurn(k int) error {
	for range k {
		if err := d.add(d.span + 1 + d.rng.Uint64N(d.span)); err != nil {
			return err
		}
	}
	return nil
}

func run(n, receivers, fires, grow, turns, minDuring int, tick time.Duration, phases []string) error {
	w, err := wheel.New(0, wheel.Config{})
	if err != nil {
		return err
	}
	d := &driver{w: w, rng: rand.New(rand.NewPCG(1, 2)), receivers: uint64(receivers), span: uint64(max(1, n/fires))}
	t0 := time.Now()
	var first1M time.Duration
	lastStart := time.Now()
	for i := range n {
		if i == n-min(n, 1_000_000) {
			lastStart = time.Now()
		}
		if err := d.add(1 + d.rng.Uint64N(d.span)); err != nil {
			return err
		}
		if i+1 == min(n, 1_000_000) {
			first1M = time.Since(t0)
		}
	}
	addAll, last1M := time.Since(t0), time.Since(lastStart)
	runtime.GC()
	rss := rssBytes()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("n=%d receivers=%d adds_per_s=%.0f first_1M_adds_per_s=%.0f last_1M_adds_per_s=%.0f rss_MiB=%.0f rss_B_per_timer=%.1f heap_inuse_B_per_timer=%.1f gogc=%s gomemlimit=%s\n",
		n, receivers, float64(n)/addAll.Seconds(), float64(min(n, 1_000_000))/first1M.Seconds(), float64(min(n, 1_000_000))/last1M.Seconds(),
		float64(rss)/(1<<20), float64(rss)/float64(n), float64(ms.HeapInuse)/float64(n), os.Getenv("GOGC"), limitString())

	if err := reportMemory(n); err != nil {
		return err
	}
	for _, phase := range phases {
		if phase == "" {
			continue
		}
		turn := d.steadyTurn
		// Every 100 ticks (the default geometry) a level-1 slot comes down.
		cascade := func() bool { return d.w.Now()%100 == 0 }
		if phase == "growing" {
			turn, cascade = func() error { return d.growTurn(grow) }, nil
		}
		probe := &turnProbe{phase: phase, call: &d.call}
		base, err := turnsFor(turns, tick, turn, cascade, nil, probe)
		if err != nil {
			return err
		}
		var during []time.Duration
		var pause time.Duration
		var f *wheel.Frozen
		var enc *encoding
		snaps := 0
		for snaps == 0 || len(during) < minDuring {
			runtime.LockOSThread()
			t1, pw := threadCPU(), probe.begin()
			f = w.Freeze()
			took := threadCPU() - t1
			pause = max(pause, took)
			probe.end("freeze", took, pw)
			runtime.UnlockOSThread()
			enc = encode(f)
			probe.during = true
			d, err := turnsFor(0, tick, turn, cascade, enc.done, probe)
			probe.during = false
			during = append(during, d...)
			if err != nil {
				return err
			}
			<-enc.done
			f.Release()
			snaps++
		}
		p50, p99, worst := stats(base)
		sp50, sp99, sworst := stats(during)
		fmt.Printf("phase=%s snapshots=%d timers=%d freeze_max_ms=%.3f turns_without=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f cascade_max_ms=%.2f turns_during_snapshot=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f cascade_max_ms=%.2f snapshot_bytes=%d B_per_timer=%.2f encode_s=%.1f rss_B_per_timer=%.1f\n",
			phase, snaps, f.Len(), ms2(pause), len(base), p50, p99, worst, cascadeMax(base), len(during), sp50, sp99, sworst, cascadeMax(during),
			enc.bytes, float64(enc.bytes)/float64(f.Len()), enc.took.Seconds(), float64(rssBytes())/float64(w.Len()))
	}
	return nil
}

// encoding is a snapshot being encoded by its own goroutine; bytes and
// took are its own until done is closed.
type encoding struct {
	done  chan struct{}
	bytes int
	took  time.Duration
}

func encode(f *wheel.Frozen) *encoding {
	e := &encoding{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		t0 := time.Now()
		f.SetYield(runtime.Gosched)
		buf := make([]byte, 0, 1<<20)
		for done := false; !done; {
			buf, done = f.AppendNext(buf[:0], 64<<10)
			e.bytes += len(buf)
			runtime.Gosched()
		}
		e.took = time.Since(t0)
	}()
	return e
}

// turnsFor runs a turn every tick, k of them, or (k == 0) until stop is
// closed, and returns the CPU time of each (threadCPU).
// A turn for which cascade returns true (it moved a level-1 slot down) is
// returned negated.
func turnsFor(k int, tick time.Duration, turn func() error, cascade func() bool, stop <-chan struct{}, probe *turnProbe) ([]time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out []time.Duration
	next := time.Now()
	for i := 0; k == 0 || i < k; i++ {
		if stop != nil {
			select {
			case <-stop:
				return out, nil
			default:
			}
		}
		t0, pw := threadCPU(), probe.begin()
		if err := turn(); err != nil {
			return out, err
		}
		took := threadCPU() - t0
		probe.end("turn", took, pw)
		if cascade != nil && cascade() {
			took = -took // marked: stats and cascadeMax tell them apart
		}
		out = append(out, took)
		next = next.Add(tick)
		time.Sleep(time.Until(next))
	}
	return out, nil
}

// cascadeMax returns the longest of the marked turns (turnsFor).
func cascadeMax(d []time.Duration) float64 {
	var m time.Duration
	for _, t := range d {
		m = max(m, -t)
	}
	return ms2(m)
}

func stats(d []time.Duration) (p50, p99, worst float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(d)
	for i, t := range s {
		s[i] = max(t, -t)
	}
	slices.Sort(s)
	return ms2(s[len(s)/2]), ms2(s[len(s)*99/100]), ms2(s[len(s)-1])
}

func ms2(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func limitString() string {
	l := debug.SetMemoryLimit(-1)
	if l == 1<<63-1 {
		return "off"
	}
	return strconv.FormatInt(l>>20, 10) + "MiB"
}

// rssBytes returns the process's resident set (VmRSS), 0 where there is
// no /proc.
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
