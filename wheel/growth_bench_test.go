package wheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkAddGrowth adds n timers to an empty wheel (1000 receivers, due up
// to a week of 10 ms ticks away, as BenchmarkMemory) and reports the
// calling thread's CPU per add over the first million adds and over the
// last million, and their ratio (issue 26: adds at 100M at >= 0.8x the
// rate of the first 1M; this is the wheel's share of it). Thread CPU, not
// wall time: the machine is shared. Run with -benchtime=1x; n = 10M holds
// about 700 MB.
func BenchmarkAddGrowth(b *testing.B) {
	for _, n := range []int{2_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			const window = 1_000_000
			for range b.N {
				w := newWheel(b, 0, Config{})
				r := rand.New(rand.NewPCG(9, 10))
				runtime.LockOSThread()
				var first, last float64
				start := threadCPU()
				for i := range n {
					if i == window {
						first = float64(threadCPU()-start) / window
					}
					if i == n-window {
						start = threadCPU()
					}
					if err := w.Add(Key{uint64(i % 1000), uint64(i)}, Spec{After: 1 + r.Uint64N(60_480_000)}); err != nil {
						b.Fatal(err)
					}
				}
				last = float64(threadCPU()-start) / window
				runtime.UnlockOSThread()
				b.ReportMetric(first, "cpu-ns/add-first1M")
				b.ReportMetric(last, "cpu-ns/add-last1M")
				b.ReportMetric(first/last, "rate-last/first")
				runtime.KeepAlive(w)
			}
		})
	}
}

// BenchmarkChurnFull fills a wheel to 0.745 of its index's table (as 100M
// timers fill 2^27 entries; here 2^23, the smallest purged) and then churns: a random timer
// cancelled, a new one added, ops times. It reports the calling thread's
// CPU per cancel and add, and the index's bytes per live timer at the end:
// a table doubled by tombstones holds twice its bytes (issue 26's budget
// of 64 bytes a timer at 100M). Run with -benchtime=1x.
func BenchmarkChurnFull(b *testing.B) {
	const n, ops = 6_249_000, 4_000_000
	for range b.N {
		w := newWheel(b, 0, Config{})
		r := rand.New(rand.NewPCG(11, 12))
		keys := make([]Key, n)
		for i := range keys {
			keys[i] = Key{uint64(i % 1000), uint64(i)}
			if err := w.Add(keys[i], Spec{After: 1 + r.Uint64N(60_480_000)}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.LockOSThread()
		start := threadCPU()
		for i := range ops {
			j := r.IntN(n)
			if err := w.Cancel(keys[j]); err != nil {
				b.Fatal(err)
			}
			keys[j] = Key{uint64(i % 1000), uint64(n + i)}
			if err := w.Add(keys[j], Spec{After: 1 + r.Uint64N(60_480_000)}); err != nil {
				b.Fatal(err)
			}
		}
		cpu := float64(threadCPU()-start) / ops
		runtime.UnlockOSThread()
		x := &w.index
		b.ReportMetric(cpu, "cpu-ns/churn")
		b.ReportMetric(float64((x.table.len()+x.old.len())*4)/float64(x.count), "index-B/timer")
		runtime.KeepAlive(w)
	}
}
