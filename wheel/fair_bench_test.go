package wheel

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkFairBurst: 1M one-shot timers due on one tick, as
// BenchmarkFireBurst, over 1, 512 or 1M receivers (each receiver's timers
// every recv-th add), so that the same-tick order (fair.go) has one
// receiver's 1M rounds, 512 receivers' rounds of 512 (add order again), or
// one round of 1M receivers (its per-receiver count at its largest). One
// op is one firing, the tick's ordering included; run it with
// -benchtime=3000000x as BenchmarkFireBurst.
func BenchmarkFairBurst(b *testing.B) {
	const n = 1_000_000
	for _, recvs := range []int{1, 512, n} {
		b.Run(fmt.Sprintf("timers=%d/receivers=%d", n, recvs), func(b *testing.B) {
			w := newWheel(b, 0, Config{})
			b.ReportAllocs()
			for fired := 0; fired < b.N; {
				b.StopTimer()
				for i := range n {
					if err := w.Add(Key{uint64(i % recvs), uint64(i + 1)}, Spec{After: 1, Repeat: 1}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				k, _ := w.Advance(w.Now()+1, 0, nil)
				if k != n {
					b.Fatalf("fired %d, want %d", k, n)
				}
				fired += k
			}
		})
	}
}

// BenchmarkBigTickFirstTurn: 1M timers repeating every 6,000 ticks (a
// minute of 10 ms ticks) over 1 or 512 receivers, and one more of another
// receiver added last, all due on one tick. One op is that tick's first
// Advance bounded to 10,000 firings, as a server's first turn of the
// minute: it moves the minute's timers down to the lowest level, makes
// the tick's order and fires the first 10,000. The rest of the tick is
// fired untimed. fired-B reports whether the other receiver's timer was
// among the first turn's firings (1) or not (0).
func BenchmarkBigTickFirstTurn(b *testing.B) {
	const n, perTurn = 1_000_000, 10_000
	for _, recvs := range []int{1, 512} {
		b.Run(fmt.Sprintf("timers=%d/receivers=%d", n, recvs), func(b *testing.B) {
			w := newWheel(b, 0, Config{})
			for i := range n {
				if err := w.Add(Key{uint64(i % recvs), uint64(i + 1)}, Spec{After: 6000}); err != nil {
					b.Fatal(err)
				}
			}
			other := Key{1 << 40, 1}
			if err := w.Add(other, Spec{After: 6000}); err != nil {
				b.Fatal(err)
			}
			firedB := 0
			onFire := func(f *Fire) {
				if f.Key == other {
					firedB++
				}
			}
			b.ResetTimer()
			for range b.N {
				due := w.Now() + 6000
				w.Advance(due, perTurn, onFire)
				b.StopTimer()
				w.Advance(due, 0, nil)
				b.StartTimer()
			}
			b.ReportMetric(float64(firedB)/float64(b.N), "fired-B")
		})
	}
}

// BenchmarkBigTickNextTick: 1M timers of one receiver due on one tick (a
// cron minute of 10 ms ticks, every 6,000 ticks) and one timer of another
// receiver due on the next tick. One op is the Advances of a server's loop
// turns from the big tick's first, each bounded to 10,000 firings with
// `to` a tick further each turn, until the other receiver's timer has
// fired: the time and turns it waited. The rest is fired untimed.
// turns-to-B reports the turns.
func BenchmarkBigTickNextTick(b *testing.B) {
	const n, perTurn = 1_000_000, 10_000
	w := newWheel(b, 0, Config{})
	for i := range n {
		if err := w.Add(Key{1, uint64(i + 1)}, Spec{After: 6000}); err != nil {
			b.Fatal(err)
		}
	}
	other := Key{1 << 40, 1}
	if err := w.Add(other, Spec{After: 6001, Every: 6000}); err != nil {
		b.Fatal(err)
	}
	turns := 0
	b.ResetTimer()
	for range b.N {
		due := w.Now() + 6000
		for to, fired := due, false; !fired; to++ {
			turns++
			w.Advance(to, perTurn, func(f *Fire) { fired = fired || f.Key == other })
		}
		b.StopTimer()
		w.Advance(due+1, 0, nil)
		b.StartTimer()
	}
	b.ReportMetric(float64(turns)/float64(b.N), "turns-to-B")
}

// BenchmarkCatchUpRotation: n one-shot timers of 10,000 receivers (each
// add's receiver a stride through them), due over 100 ticks, fired by
// Advance calls bounded to 10,000 firings from a wheel that is 100 ticks
// late: the first call leaves a backlog, and each later one merges the
// next tick's timers into it, so they fire in the rotation mode (fair.go)
// as a server's catch-up after downtime and a restart's replay of it do.
// Each last firing removes its key from an index past the cache. One op is
// one firing; run it with -benchtime=2000000x (a round fires all n).
func BenchmarkCatchUpRotation(b *testing.B) {
	const ticks = 100
	for _, n := range []int{1_000_000, 4_000_000} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			catchUp(b, n, func(i int) uint64 { return uint64(i % ticks) }, ticks, 10_000)
		})
	}
}

// BenchmarkSparseCatchUp: n one-shot timers of 10,000 receivers (a stride
// through them), two due on each tick, fired by unbounded Advance calls of
// 10,000 ticks from a wheel that is late by all of them: a catch-up over
// hours of timers spread thin, as a restart's replay of one runs. Each
// tick's due list is two timers long, and each firing deletes its key from
// an index past the cache. One op is one firing; run it with
// -benchtime=2000000x (a round fires all n).
func BenchmarkSparseCatchUp(b *testing.B) {
	for _, n := range []int{1_000_000, 4_000_000} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			catchUp(b, n, func(i int) uint64 { return uint64(i / 2) }, uint64(n/2), 0)
		})
	}
}

// catchUp runs the catch-up benchmarks: rounds of n one-shot timers of
// 10,000 receivers, timer i due tick(i)+1 ticks on (< span), added
// untimed, then fired by Advance calls up to 10,000 ticks on each, max
// firings a call (0: no limit; a bounded round must go through the
// rotation mode), timed by CPU too.
func catchUp(b *testing.B, n int, tick func(i int) uint64, span uint64, max int) {
	const recvs = 10_000
	w := newWheel(b, 0, Config{})
	b.ReportAllocs()
	var cpu time.Duration
	defer func() { reportCPU(b, cpu) }()
	for fired := 0; fired < b.N; {
		b.StopTimer()
		base := w.Now()
		for i := range n {
			k := Key{uint64(i*7919%recvs) + 1, base<<32 | uint64(i+1)}
			if err := w.Add(k, Spec{After: 1 + tick(i), Repeat: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := cpuTime()
		rotated := false
		for to := base; w.Len() > 0; {
			to = min(to+10_000, base+span)
			k, _ := w.Advance(to, max, nil)
			fired += k
			rotated = rotated || w.rot.on
		}
		cpu += cpuTime() - start
		if max > 0 && !rotated {
			b.Fatal("the backlog did not fire in the rotation")
		}
	}
}
