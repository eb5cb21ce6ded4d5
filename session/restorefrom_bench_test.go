package session

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tickwheel/tickwheel/wheel"
)

// BenchmarkRestoreFrom: a start-up's restore of a Core of n timers (1000
// receivers, 10% with data), its snapshot read from a file as the server
// reads it, whole first and then decoded (read=whole: what start-up did
// before RestoreFrom) or decoded as it is read (read=stream). The file is
// in the page cache after the first run. Reports wall and CPU time per
// timer (CPU: all threads, the index builder's included).
func BenchmarkRestoreFrom(b *testing.B) {
	dir := b.TempDir() // the sub-benchmarks' own go with each
	for _, n := range []int{1_000_000, 10_000_000} {
		var path string
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("timers=%dM/read=whole", n/1_000_000)
			if stream {
				name = fmt.Sprintf("timers=%dM/read=stream", n/1_000_000)
			}
			b.Run(name, func(b *testing.B) {
				if testing.Short() && n > 1_000_000 {
					b.Skip("10M timers under -short")
				}
				if path == "" {
					path = restoreBenchFile(b, dir, n)
				}
				cpu0 := cpuTime(b)
				for b.Loop() {
					f, err := os.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					var c *Core
					if stream {
						c, err = RestoreFrom(Config{}, f, nil, nil)
					} else {
						var data bytes.Buffer
						st, _ := f.Stat()
						data.Grow(int(st.Size()) + 1)
						if _, err = data.ReadFrom(f); err == nil {
							c, err = Restore(Config{}, data.Bytes(), nil, nil)
						}
					}
					f.Close()
					if err != nil {
						b.Fatal(err)
					}
					if c.wheel.Len() != n {
						b.Fatalf("restored %d timers", c.wheel.Len())
					}
				}
				cpu := cpuTime(b) - cpu0
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/timer")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/timer")
			})
		}
	}
}

// restoreBenchFile writes the snapshot of a Core of n timers to a file in
// dir, and returns its path.
func restoreBenchFile(b *testing.B, dir string, n int) string {
	w, err := wheel.New(1_700_000_000_00, wheel.Config{})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 64)
	for i := range n {
		s := wheel.Spec{After: 1 + uint64(i*7919%60_480_000)}
		if i%10 == 0 {
			s.Data = data[:8+i%57]
		}
		if err := w.Add(wheel.Key{Receiver: uint64(i % 1000), Tid: uint64(i)}, s); err != nil {
			b.Fatal(err)
		}
	}
	snap := New(Config{TickNs: 10_000_000}, Limits{}, w, nil, nil).Snapshot()
	var buf []byte
	done := false
	for !done {
		buf, done = snap.AppendNext(buf, 0)
	}
	snap.Release()
	path := filepath.Join(dir, fmt.Sprintf("snap%d", n))
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}
