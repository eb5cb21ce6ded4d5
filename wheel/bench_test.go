package wheel

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// Benchmarks for docs/BENCHMARKS.md. Each compares the wheel with Go's
// runtime timers (time.AfterFunc + Stop) and a container/heap queue in the
// same run; record ratios, not absolute times.

var benchRecv uint64 = 0

var liveSizes = []int{1_000, 1_000_000}

// fillWheel adds n timers for receiver 0 due within the next `spread` ticks.
func fillWheel(b *testing.B, w *Wheel, n int, spread uint64) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		if err := w.Add(Key{0, uint64(i)}, Spec{After: 1 + r.Uint64N(spread)}); err != nil {
			b.Fatal(err)
		}
	}
}

// afters is a table of intervals the add/cancel loops cycle through.
var afters = func() []uint64 {
	r := rand.New(rand.NewPCG(3, 4))
	a := make([]uint64, 4096)
	for i := range a {
		a[i] = 1 + r.Uint64N(1_000_000)
	}
	return a
}()

func BenchmarkAddCancel(b *testing.B) {
	for _, live := range liveSizes {
		b.Run(fmt.Sprintf("impl=wheel/live=%d", live), func(b *testing.B) {
			w := newWheel(b, 0, Config{})
			fillWheel(b, w, live, 1_000_000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := Key{benchRecv, uint64(live + i&1023)}
				if err := w.Add(k, Spec{After: afters[i&4095]}); err != nil {
					b.Fatal(err)
				}
				if err := w.Cancel(k); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("impl=afterfunc/live=%d", live), func(b *testing.B) {
			f := func() {}
			timers := make([]*time.Timer, live)
			for i := range timers {
				timers[i] = time.AfterFunc(time.Hour+time.Duration(afters[i&4095])*time.Millisecond, f)
			}
			b.Cleanup(func() {
				for _, t := range timers {
					t.Stop()
				}
			})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := time.AfterFunc(time.Hour+time.Duration(afters[i&4095])*time.Millisecond, f)
				t.Stop()
			}
		})
		b.Run(fmt.Sprintf("impl=heap/live=%d", live), func(b *testing.B) {
			q := make(heapQueue, 0, live+1)
			for i := range live {
				heap.Push(&q, &heapTimer{due: afters[i&4095], seq: uint64(i), tid: uint64(i)})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := &heapTimer{due: afters[i&4095], seq: uint64(live + i), receiver: 1, tid: uint64(i & 1023)}
				heap.Push(&q, t)
				heap.Remove(&q, t.index)
			}
		})
	}
}

// BenchmarkFireRearm: repeating timers with intervals of 1..1000 ticks; the
// wheel advances one tick at a time. ns/op is per firing, re-arm included.
func BenchmarkFireRearm(b *testing.B) {
	for _, live := range []int{1_000, 10_000, 100_000} {
		r := rand.New(rand.NewPCG(5, 6))
		every := make([]uint64, live)
		for i := range every {
			every[i] = 1 + r.Uint64N(1000)
		}
		b.Run(fmt.Sprintf("impl=wheel/live=%d", live), func(b *testing.B) {
			w := newWheel(b, 0, Config{})
			for i, e := range every {
				if err := w.Add(Key{0, uint64(i)}, Spec{After: e}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for fired := 0; fired < b.N; {
				n, _ := w.Advance(w.Now()+1, 0, nil)
				fired += n
			}
			reportCPU(b, cpuTime()-cpu)
		})
		b.Run(fmt.Sprintf("impl=heap/live=%d", live), func(b *testing.B) {
			q := make(heapQueue, 0, live)
			for i, e := range every {
				heap.Push(&q, &heapTimer{due: e, every: e, seq: uint64(i), tid: uint64(i)})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for now, fired := uint64(0), 0; fired < b.N; {
				now++
				fired += q.advance(now)
			}
		})
	}
}

// BenchmarkAdvanceEmptyTick: the cost of a tick on which nothing fires, with
// 0 or 1M timers all due far later. Flat across sizes = O(1).
func BenchmarkAdvanceEmptyTick(b *testing.B) {
	for _, live := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			w := newWheel(b, 0, Config{})
			for i := range live {
				if err := w.Add(Key{0, uint64(i)}, Spec{After: 1 << 40}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n, _ := w.Advance(w.Now()+1, 0, nil); n != 0 {
					b.Fatal("fired")
				}
			}
		})
	}
}

// BenchmarkFastForwardDay: 1M one-shot timers spread over a week of 10 ms
// ticks; one Advance across a day (8.64M ticks, 142k firings). impl=wheel
// skips empty time; impl=wheel-per-tick advances one tick per call, as a
// loop without skipping would; impl=heap is the container/heap queue.
func BenchmarkFastForwardDay(b *testing.B) {
	const (
		day   = 24 * 3600 * 100
		week  = 7 * day
		n     = 1_000_000
		start = 1_700_000_000_00
	)
	dues := make([]uint64, n)
	r := rand.New(rand.NewPCG(7, 8))
	want := 0 // timers due within the day
	for j := range dues {
		dues[j] = 1 + r.Uint64N(week)
		if dues[j] <= day {
			want++
		}
	}
	run := func(b *testing.B, setup func(), advance func() int) {
		fired := 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			setup()
			runtime.GC()
			b.StartTimer()
			fired = advance()
		}
		if fired != want {
			b.Fatalf("fired %d, want %d", fired, want)
		}
		b.ReportMetric(float64(fired), "fires/op")
	}
	var w *Wheel
	fill := func(dueOnly bool) func() {
		return func() {
			w = newWheel(b, start, Config{})
			for j, d := range dues {
				if dueOnly && d > day {
					continue
				}
				if err := w.Add(Key{0, uint64(j)}, Spec{After: d, Repeat: 1}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	setupWheel := fill(false)
	b.Run("impl=wheel", func(b *testing.B) {
		run(b, setupWheel, func() int {
			n, _ := w.Advance(start+day, 0, nil)
			return n
		})
	})
	// The same firings with only the timers due that day in the wheel: the
	// cost of the firings themselves.
	b.Run("impl=wheel-due-only", func(b *testing.B) {
		run(b, fill(true), func() int {
			n, _ := w.Advance(start+day, 0, nil)
			return n
		})
	})
	b.Run("impl=wheel-per-tick", func(b *testing.B) {
		run(b, setupWheel, func() int {
			fired := 0
			for t := uint64(start + 1); t <= start+day; t++ {
				n, _ := w.Advance(t, 0, nil)
				fired += n
			}
			return fired
		})
	})
	var q heapQueue
	b.Run("impl=heap", func(b *testing.B) {
		run(b, func() {
			q = make(heapQueue, 0, n)
			for j, d := range dues {
				q = append(q, &heapTimer{due: start + d, seq: uint64(j), tid: uint64(j), index: j})
			}
			heap.Init(&q)
		}, func() int {
			fired := 0
			for len(q) > 0 && q[0].due <= start+day {
				heap.Pop(&q)
				fired++
			}
			return fired
		})
	})
}

// BenchmarkMemory reports the heap held per live timer with 10M timers
// without data. Run with -benchtime=1x.
func BenchmarkMemory(b *testing.B) {
	const n = 10_000_000
	measure := func(b *testing.B, build func() func()) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		release := build()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/timer")
		release()
	}
	b.Run("impl=wheel", func(b *testing.B) {
		measure(b, func() func() {
			w := newWheel(b, 0, Config{})
			r := rand.New(rand.NewPCG(9, 10))
			for i := range n {
				// 1000 receivers of 10k timers each, due up to a week of 10 ms ticks away.
				if err := w.Add(Key{uint64(i % 1000), uint64(i)}, Spec{After: 1 + r.Uint64N(60_480_000)}); err != nil {
					b.Fatal(err)
				}
			}
			return func() { runtime.KeepAlive(w) }
		})
	})
	b.Run("impl=afterfunc", func(b *testing.B) {
		measure(b, func() func() {
			f := func() {}
			r := rand.New(rand.NewPCG(9, 10))
			timers := make([]*time.Timer, n)
			for i := range timers {
				timers[i] = time.AfterFunc(time.Hour+time.Duration(r.Uint64N(604_800_000))*time.Millisecond, f)
			}
			return func() {
				for _, t := range timers {
					t.Stop()
				}
			}
		})
	})
	b.Run("impl=heap", func(b *testing.B) {
		measure(b, func() func() {
			r := rand.New(rand.NewPCG(9, 10))
			q := make(heapQueue, 0)
			for i := range n {
				heap.Push(&q, &heapTimer{due: 1 + r.Uint64N(60_480_000), seq: uint64(i), receiver: uint64(i % 1000), tid: uint64(i)})
			}
			return func() { runtime.KeepAlive(q) }
		})
	})
}

// BenchmarkFireBurst: n one-shot timers all due on the same tick, the load
// test's "fire" scenario inside the engine. One op is one firing, which
// removes its timer (and its key from the index). Adding them is not timed.
// A round fires all n at once, so run it with -benchtime=3000000x (or any
// count of at least n): with fewer ops a round would count as fewer firings.
func BenchmarkFireBurst(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000, 3_000_000} {
		b.Run(fmt.Sprintf("impl=wheel/live=%d", n), func(b *testing.B) { fireBurst(b, n, false) })
		// The same after a cancel-all of n timers over 512 receivers, which
		// frees their nodes receiver by receiver: the allocator must still
		// hand the next burst neighbouring nodes (see freeSet).
		b.Run(fmt.Sprintf("impl=wheel/live=%d/after=cancelall", n), func(b *testing.B) { fireBurst(b, n, true) })
		b.Run(fmt.Sprintf("impl=heap/live=%d", n), func(b *testing.B) {
			q := make(heapQueue, 0, n)
			b.ReportAllocs()
			for fired, now := 0, uint64(0); fired < b.N; {
				b.StopTimer()
				for i := range n {
					heap.Push(&q, &heapTimer{due: now + 1, seq: uint64(i), tid: uint64(i + 1)})
				}
				b.StartTimer()
				now++
				fired += q.advance(now)
			}
		})
	}
}

// reportCPU reports cpu, the CPU time of b.N operations, as cpu-ns/op: the
// firing benchmarks' figure that other processes on a shared machine move
// less than the wall time (see cpuTime).
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// fireBurst runs BenchmarkFireBurst for the wheel: rounds of n one-shot
// timers added (untimed, after a cancel-all of n others when scatter) and
// fired by one Advance.
func fireBurst(b *testing.B, n int, scatter bool) {
	w := newWheel(b, 0, Config{})
	b.ReportAllocs()
	var cpu time.Duration
	defer func() { reportCPU(b, cpu) }()
	for fired := 0; fired < b.N; {
		b.StopTimer()
		if scatter {
			for i := range n {
				if err := w.Add(Key{uint64(i % 512), uint64(i + 1)}, Spec{After: 1000, Repeat: 1}); err != nil {
					b.Fatal(err)
				}
			}
			for r := range uint64(512) {
				w.CancelAll(r)
			}
		}
		for i := range n {
			k := Key{uint64(i%8+1)<<24 | uint64(i/8%64), uint64(i + 1)}
			if err := w.Add(k, Spec{After: 1, Repeat: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c0 := cpuTime()
		k, _ := w.Advance(w.Now()+1, 0, nil)
		cpu += cpuTime() - c0
		if k != n {
			b.Fatalf("fired %d, want %d", k, n)
		}
		fired += k
	}
}
