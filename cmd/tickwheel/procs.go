package main

import (
	"os"
	"runtime"
	"time"
)

// How many Ps the server runs with when the runtime would give it one (a
// server pinned to one CPU with taskset or a cpuset), unless $GOMAXPROCS
// says otherwise. (Setting them turns off the runtime's own updates of
// GOMAXPROCS for the process; it only happens where that chose 1.)
//
// The event loop sleeps in epoll_wait between turns, a system call. With
// one P the runtime's monitor (sysmon) takes that P back from the sleeping
// thread after 20 µs, and keeps waking every 20 µs while it does so: on a
// server with work every tick that is most of its time (perf at a 1 ms tick
// and 50k fires/s: 12% of the server's samples in the monitor's sleeps,
// 0.6% with two Ps; its CPU 1.0–1.6 s over 5 s with one P, 0.7–1.0 s with
// two). With a second P idle the monitor leaves the loop's thread its P.
// But while the loop's P sits in a system call the monitor never sleeps
// deeply: with two Ps an idle server wakes every 10 ms (0.15% of a core
// with 1M timers, against 0.03% with one). So a server in memory starts
// with two Ps, gives one back after quietFor with fewer than busyRate
// advance turns a second, and takes it again from the first busy second
// (looked at every adaptEvery: a shorter period costs an idle server
// more wake-ups than it saves). A durable server keeps two Ps:
// its snapshot goroutine's file writes and fsync would otherwise hold the
// only P while in the kernel, and the loop would wait up to 10 ms for it.
const (
	busyRate   = 100 // advance turns a second
	adaptEvery = time.Second
	quietFor   = 10 * time.Second

	busyTurns  = uint64(busyRate * adaptEvery / time.Second) // per adaptEvery
	quietSteps = int(quietFor / adaptEvery)
)

// procsPolicy sets the Ps for a server that is durable or not, and returns
// the function to run beside the server that adapts them to its load (nil:
// nothing to adapt).
func procsPolicy(durable bool) func(turns func() uint64, done <-chan struct{}) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) >= 2 {
		return nil
	}
	runtime.GOMAXPROCS(2)
	if durable {
		return nil
	}
	return func(turns func() uint64, done <-chan struct{}) {
		t := time.NewTicker(adaptEvery)
		defer t.Stop()
		a := procsAdapter{two: true}
		last := turns()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			n := turns()
			if want, change := a.step(n - last); change {
				runtime.GOMAXPROCS(want)
			}
			last = n
		}
	}
}

// procsAdapter decides, adaptEvery at a time, between one P and two: two
// from the first step with busyTurns advance turns, one again after
// quietSteps steps in a row with fewer.
type procsAdapter struct {
	two   bool
	quiet int // steps in a row below busyTurns while two
}

// step takes the advance turns of the last step and returns the Ps
// wanted, and whether that is a change.
func (a *procsAdapter) step(turns uint64) (procs int, change bool) {
	switch {
	case turns >= busyTurns:
		a.quiet = 0
		if !a.two {
			a.two = true
			return 2, true
		}
	case a.two:
		if a.quiet++; a.quiet >= quietSteps {
			a.two, a.quiet = false, 0
			return 1, true
		}
	}
	if a.two {
		return 2, false
	}
	return 1, false
}
