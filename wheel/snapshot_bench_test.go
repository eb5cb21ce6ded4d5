package wheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// snapWheel returns a wheel of n timers over 1000 receivers, due within a
// week of 10 ms ticks, a tenth of them with 8 to 64 bytes of data. With
// churn, a third of them are cancelled and as many added again, so freed
// nodes are reused and the slab is no longer in add order.
func snapWheel(b testing.TB, n int, churn bool) *Wheel {
	w := newWheel(b, 1_700_000_000_00, Config{})
	r := rand.New(rand.NewPCG(21, 22))
	data := make([]byte, 64)
	add := func(i int) {
		s := Spec{After: 1 + r.Uint64N(60_480_000)}
		if i%10 == 0 {
			s.Data = data[:8+r.IntN(57)]
		}
		if err := w.Add(Key{uint64(i % 1000), uint64(i)}, s); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		add(i)
	}
	if churn {
		for i := 0; i < n; i += 3 {
			_ = w.Cancel(Key{uint64(i % 1000), uint64(i)})
		}
		for i := n; w.Len() < n; i++ {
			add(i)
		}
	}
	return w
}

// BenchmarkFreeze: the pause of the event loop for a snapshot, Freeze, at
// 1M timers (10% with data): a copy of the page lists, the pages shared.
// Besides the mean it reports the median and the worst pause. The copies
// the wheel makes afterwards are BenchmarkTurnWhileFrozen's.
func BenchmarkFreeze(b *testing.B) {
	w := snapWheel(b, 1_000_000, false)
	w.Freeze().Release()
	runtime.GC()
	b.ReportAllocs()
	var pauses []time.Duration
	for b.Loop() {
		t0 := time.Now()
		f := w.Freeze()
		pauses = append(pauses, time.Since(t0))
		b.StopTimer()
		f.Release()
		b.StartTimer()
	}
	slices.Sort(pauses)
	b.ReportMetric(float64(pauses[len(pauses)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pauses[len(pauses)-1].Microseconds())/1000, "worst-ms")
}

// BenchmarkEncode: encoding a Frozen of 1M timers in 1 MiB pieces, as a
// writer to a file would. fresh: timers added in order; churned: a third
// replaced, so the slab is out of order; scale: scaleWheel's (10,000
// receivers from 2^40, round-robin), each record's receiver by id
// (format 6). MB/s is snapshot bytes per second.
func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"fresh", "churned", "scale"} {
		b.Run("timers=1M/"+name, func(b *testing.B) {
			var w *Wheel
			if name == "scale" {
				w = scaleWheel(b, 1_000_000)
			} else {
				w = snapWheel(b, 1_000_000, name == "churned")
			}
			buf := make([]byte, 0, 2<<20)
			size := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				f := w.Freeze()
				b.StartTimer()
				size = 0
				for done := false; !done; {
					buf, done = f.AppendNext(buf[:0], 1<<20)
					size += len(buf)
				}
				b.StopTimer()
				f.Release()
				b.StartTimer()
			}
			b.SetBytes(int64(size))
			b.ReportMetric(float64(size)/float64(w.Len()), "B/timer")
		})
	}
}

// BenchmarkRestore: restoring a snapshot written in 1 MiB pieces, as read
// from a file, index build included; with index=aside, the index is built
// on a second goroutine while the records are decoded, as
// session.restoreWheel does (compare -cpu 1 and -cpu 2). Besides ns/timer
// (wall time) it reports cpu-ns/timer, the process's CPU time (user and
// system, every goroutine, the GC's included). Run 10M with
// -benchtime=2x; it is skipped under -short.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		var snap []byte
		for _, aside := range []bool{false, true} {
			name := fmt.Sprintf("timers=%dM", n/1_000_000)
			if aside {
				name += "/index=aside"
			}
			b.Run(name, func(b *testing.B) {
				if testing.Short() && n > 1_000_000 {
					b.Skip("10M timers under -short")
				}
				if snap == nil {
					w := snapWheel(b, n, false)
					f := w.Freeze()
					snap = f.Encode(nil)
					f.Release()
				}
				benchRestore(b, snap, n, aside)
			})
		}
	}
}

func benchRestore(b *testing.B, snap []byte, n int, aside bool) {
	runtime.GC()
	b.ReportAllocs()
	b.SetBytes(int64(len(snap)))
	var w *Wheel
	var threads [2]time.Duration
	cpu0 := cpuTime()
	for b.Loop() {
		w = nil
		var err error
		if w, err = restoreBench(snap, aside, &threads); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	if w.Len() != n {
		b.Fatalf("restored %d timers", w.Len())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/timer")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/timer")
	b.ReportMetric(float64(len(snap))/float64(n), "B/timer")
	if aside {
		b.ReportMetric(float64(threads[0].Nanoseconds())/float64(b.N)/float64(n), "dec-cpu-ns/timer")
		b.ReportMetric(float64(threads[1].Nanoseconds())/float64(b.N)/float64(n), "idx-cpu-ns/timer")
	}
}

// restoreBench restores snap written in 1 MiB pieces, the index built on
// another goroutine with aside. With aside it adds to threads the CPU time
// of the goroutine that decodes (Writes and Wheel) and of the one that
// builds the index, each locked to its thread: on an idle machine with
// two cores the wall time is about the larger of the two.
func restoreBench(snap []byte, aside bool, threads *[2]time.Duration) (*Wheel, error) {
	if aside {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := threadCPU()
		defer func() { threads[0] += threadCPU() - t0 }()
	}
	r, err := NewRestorer(Config{})
	if err != nil {
		return nil, err
	}
	var marks chan RestoreMark
	done := make(chan bool, 1)
	defer func() {
		if marks != nil {
			close(marks)
			<-done
		}
	}()
	for p := snap; len(p) > 0; {
		k := min(len(p), 1<<20)
		if _, err := r.Write(p[:k]); err != nil {
			return nil, err
		}
		p = p[k:]
		if !aside {
			continue
		}
		if marks == nil {
			ib := r.IndexBuilder()
			marks = make(chan RestoreMark, 64)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				ok := true
				for m := range marks {
					ok = ok && ib.Add(m)
				}
				threads[1] += threadCPU() - t0
				done <- ok
			}()
		}
		marks <- r.Ready()
	}
	if marks != nil {
		close(marks)
		<-done
		marks = nil
		if parts := r.IndexBuilder().Parts(2); parts != nil { // as session.fillIndex
			filled := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				parts[1].Fill()
				threads[1] += threadCPU() - t0
				close(filled)
			}()
			parts[0].Fill()
			<-filled
		}
	}
	return r.Wheel()
}

// BenchmarkCascadeWhileFrozen: the turn that moves a level-1 slot down
// (every 100 ticks; 50k timers at 500 due per tick, scattered over the
// slab) at 1M and 10M timers, without a snapshot and right after a Freeze
// whose encoder has not started (the worst case: the wheel encodes, or
// before format 3 copied, a page for each timer it first writes). ms/op is
// that turn alone; the 99 turns between are not timed.
func BenchmarkCascadeWhileFrozen(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		if testing.Short() && n > 1_000_000 {
			continue
		}
		const perTick = 500
		span := uint64(n / perTick)
		w := newWheel(b, 0, Config{})
		r := rand.New(rand.NewPCG(1, 2))
		next := uint64(0)
		add := func(after uint64) {
			next++
			if err := w.Add(Key{next % 10_000, next}, Spec{After: after, Repeat: 1}); err != nil {
				b.Fatal(err)
			}
		}
		for range n {
			add(1 + r.Uint64N(span))
		}
		refill := func(to uint64) { // the steady state: as many added as fired
			fired := 0
			w.Advance(to, 0, func(*Fire) { fired++ })
			for range fired {
				add(span)
			}
		}
		for _, frozen := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/frozen=%v", n, frozen), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					t := w.Now() + 100 - w.Now()%100 // the next cascade tick
					refill(t - 1)
					var f *Frozen
					if frozen {
						f = w.Freeze()
					}
					runtime.GC()
					b.StartTimer()
					refill(t)
					b.StopTimer()
					if f != nil {
						f.Release()
					}
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkRestoreWrittenWhileAdding restores a snapshot encoded while the
// wheel took adds between its pieces (as a server's snapshot is, written
// while clients add): each add writes its receiver's newest node, which the
// write barrier saves and the encoder writes out of slab order, ahead of
// the older timers of its receiver: a restore links each of those after it
// (Restorer.linkRecv; before, it sorted nearly every receiver's list after
// the records). The same timers' stopped-world snapshot is
// BenchmarkRestore's.
func BenchmarkRestoreWrittenWhileAdding(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("timers=%dM", n/1_000_000), func(b *testing.B) {
			if testing.Short() && n > 1_000_000 {
				b.Skip("10M timers under -short")
			}
			w := snapWheel(b, n, false)
			f := w.Freeze()
			var snap []byte
			next := n
			for done := false; !done; {
				snap, done = f.AppendNext(snap, 64<<10)
				for range 100 {
					if err := w.Add(Key{uint64(next % 1000), uint64(next)}, Spec{After: 1 + uint64(next%60_480_000)}); err != nil {
						b.Fatal(err)
					}
					next++
				}
			}
			f.Release()
			benchRestore(b, snap, n, false)
		})
	}
}

// BenchmarkRestoreChurned restores the stopped-world snapshot of a
// churned wheel (snapWheel with churn: a third of the timers cancelled and
// as many added, into the freed nodes), the index built aside: the slab is
// far from add order, as a server's is after hours of firings and
// cancels, so most receivers' lists come out of order and are sorted
// after the records (Restorer.sortLists).
func BenchmarkRestoreChurned(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("timers=%dM", n/1_000_000), func(b *testing.B) {
			if testing.Short() && n > 1_000_000 {
				b.Skip("10M timers under -short")
			}
			w := snapWheel(b, n, true)
			f := w.Freeze()
			snap := f.Encode(nil)
			f.Release()
			benchRestore(b, snap, n, true)
		})
	}
}
