package main

import (
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/trace"
	"time"
)

// slowTurn is the -slow threshold: turns and Freezes of at least this
// much CPU are printed with what ran in them (turnProbe). 0: off, and the
// wheel's calls are not timed.
var slowTurn time.Duration

// start is when the process began its work: the slow turns' offsets are
// from here, as GODEBUG=gctrace=1's "@s" are from the runtime's start
// (the two differ by the runtime's start-up, under a millisecond).
var start = time.Now()

// longest is the longest of a turn's wheel calls (Add, Advance), by wall
// time, and its position among them.
type longest struct {
	calls, at int
	d         time.Duration
}

func (l *longest) note(d time.Duration) {
	if d > l.d {
		l.d, l.at = d, l.calls
	}
	l.calls++
}

// turnProbe prints a slow turn: its CPU and wall time, its longest wheel
// call, and the collections that began or ended in it (runtime/metrics),
// so that a long turn can be told apart as one slow call (a big
// allocation, a step of the index's move) or as time spread over the
// calls (the collector's assists, cache misses), and matched with the
// gctrace lines of the same moments.
type turnProbe struct {
	phase  string
	during bool // a snapshot is being written
	call   *longest
	n      int // turns begun
	s      [2]metrics.Sample
}

// probeWindow is what begin read, for end.
type probeWindow struct {
	wall       time.Time
	gcs, goals uint64
	faults     int64
}

func (p *turnProbe) read() (gcs, goal uint64) {
	p.s[0].Name, p.s[1].Name = "/gc/cycles/total:gc-cycles", "/gc/heap/goal:bytes"
	metrics.Read(p.s[:])
	return p.s[0].Value.Uint64(), p.s[1].Value.Uint64()
}

func (p *turnProbe) begin() probeWindow {
	if slowTurn == 0 {
		return probeWindow{}
	}
	*p.call = longest{}
	gcs, goal := p.read()
	return probeWindow{wall: time.Now(), gcs: gcs, goals: goal, faults: threadFaults()}
}

// end prints the turn (what is "turn" or "freeze") begun at w if its CPU
// took at least slowTurn.
func (p *turnProbe) end(what string, cpu time.Duration, w probeWindow) {
	if slowTurn == 0 {
		return
	}
	p.n++
	if cpu < slowTurn {
		return
	}
	wall, faults := time.Since(w.wall), threadFaults()-w.faults
	gcs, goal := p.read()
	fmt.Printf("slow %s phase=%s during_snapshot=%v turn=%d at_s=%.3f cpu_ms=%.2f wall_ms=%.2f minor_faults=%d calls=%d longest_call_ms=%.2f longest_call_at=%d gc_cycles_ended=%d heap_goal_MiB=%d->%d\n",
		what, p.phase, p.during, p.n, w.wall.Sub(start).Seconds(), ms2(cpu), ms2(wall), faults, p.call.calls, ms2(p.call.d), p.call.at,
		gcs-w.gcs, w.goals>>20, goal>>20)
}

// startTrace starts an execution trace into path; the function it returns
// stops it and closes the file.
func startTrace(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { trace.Stop(); f.Close() }, nil
}
