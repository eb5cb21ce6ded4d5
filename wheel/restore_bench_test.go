package wheel

import (
	"fmt"
	"runtime"
	"testing"
)

// scaleWheel returns a wheel shaped like the scale scenario's
// (loadtest.scaleTimer): n one-shot timers (Repeat 1) added round-robin
// over 10,000 receivers from 2^40, each receiver's tids counting up, due
// in add order over a week of 10 ms ticks after the first hour.
func scaleWheel(b testing.TB, n int) *Wheel {
	w := newWheel(b, 1_700_000_000_000, Config{})
	const recvs = 10_000
	span := uint64(7*24*360_000 - 360_000)
	for i := range n {
		after := 360_000 + span*uint64(i)/uint64(n)
		if err := w.Add(Key{uint64(1<<40 + i%recvs), uint64(i/recvs + 1)}, Spec{After: after, Repeat: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return w
}

// BenchmarkRestoreRecords: the decoding goroutine's part of a restore
// alone, Restorer.Write of a whole snapshot in 256 KiB pieces (as
// session.restoreWheelFrom writes them), without the index and the
// receivers' lists, which Wheel or an IndexBuilder on another goroutine
// build: at 100M timers this is the restart's long pole. shape=random is
// snapWheel's (1,000 receivers, random due ticks, a tenth with data),
// shape=scale scaleWheel's. ns/timer is the wall time of one Write pass,
// the kernel's clearing of the new slab's pages included; user-ns/timer
// the process's user CPU time, without it.
func BenchmarkRestoreRecords(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	for _, shape := range []string{"random", "scale"} {
		b.Run(fmt.Sprintf("timers=%dM/shape=%s", n/1_000_000, shape), func(b *testing.B) {
			var w *Wheel
			if shape == "random" {
				w = snapWheel(b, n, false)
			} else {
				w = scaleWheel(b, n)
			}
			f := w.Freeze()
			snap := f.Encode(nil)
			f.Release()
			w = nil
			runtime.GC()
			b.SetBytes(int64(len(snap)))
			b.ReportAllocs()
			user0 := userCPUTime()
			for b.Loop() {
				r, err := NewRestorer(Config{})
				if err != nil {
					b.Fatal(err)
				}
				for p := snap; len(p) > 0; {
					k := min(len(p), 256<<10)
					if _, err := r.Write(p[:k]); err != nil {
						b.Fatal(err)
					}
					p = p[k:]
				}
				if got := r.Ready(); got.n-r.w.nodes.nsent != uint32(n) {
					b.Fatalf("decoded %d timers", got.n-r.w.nodes.nsent)
				}
			}
			user := userCPUTime() - user0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/timer")
			b.ReportMetric(float64(user.Nanoseconds())/float64(b.N)/float64(n), "user-ns/timer")
			b.ReportMetric(float64(len(snap))/float64(n), "B/timer")
		})
	}
}
