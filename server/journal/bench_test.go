package journal

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppend is one 200-byte record per op, no fsync on the path: what
// a loop turn pays with everysec (whose goroutine fsyncs meanwhile) or no.
func BenchmarkAppend(b *testing.B) {
	for _, pol := range []SyncPolicy{SyncNo, SyncEverySec} {
		b.Run(pol.String(), func(b *testing.B) {
			j := mustOpen(b, Options{Dir: b.TempDir(), Sync: pol})
			defer j.Close()
			rec := make([]byte, 200)
			// Warm the queue's and the library's buffers, through two
			// background fsyncs with everysec (the queue keeps what is
			// written until it is fsynced, so its buffers grow until then).
			for k := 0; k < 1000 || pol == SyncEverySec && j.Stats().Syncs < 2; k++ {
				j.Append(rec)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(rec)))
			b.ResetTimer()
			for b.Loop() {
				if _, err := j.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendSync is SyncAlways with one record per turn: Append and
// Sync (one fdatasync) per op, the segment growing by appending or
// preallocated in 64 KiB steps (the server's setting).
func BenchmarkAppendSync(b *testing.B) {
	for _, step := range []int64{0, 64 << 10} {
		b.Run(fmt.Sprintf("preallocate=%d", step), func(b *testing.B) {
			j := mustOpen(b, Options{Dir: b.TempDir(), Sync: SyncAlways, Preallocate: step})
			defer j.Close()
			rec := make([]byte, 200)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := j.Append(rec); err != nil {
					b.Fatal(err)
				}
				if err := j.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGroupCommit64 is 64 Appends of 200 bytes and one Sync per op:
// group commit when many turns share an fsync.
func BenchmarkGroupCommit64(b *testing.B) {
	j := mustOpen(b, Options{Dir: b.TempDir(), Sync: SyncAlways})
	defer j.Close()
	rec := make([]byte, 200)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		for range 64 {
			if _, err := j.Append(rec); err != nil {
				b.Fatal(err)
			}
		}
		if err := j.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*64), "ns/record")
}

// BenchmarkOpenReplay1M opens a log of 1M records of 40 bytes (one 47 MB
// segment, no snapshot) and replays it: recovery time after a crash.
func BenchmarkOpenReplay1M(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	j := mustOpen(b, Options{Dir: dir, Sync: SyncNo})
	rec := make([]byte, 40)
	for range n {
		if _, err := j.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		j := mustOpen(b, Options{Dir: dir, Sync: SyncNo})
		var got uint64
		err := j.Replay(func(i uint64, r []byte) error {
			got++
			return nil
		})
		if err != nil || got != n {
			b.Fatalf("replayed %d, %v", got, err)
		}
		j.Close()
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "records/s")
}
