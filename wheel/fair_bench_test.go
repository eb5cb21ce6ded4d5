package wheel

import (
	"fmt"
	"testing"
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
