package client

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/tickwheel/tickwheel/server"
)

// BenchmarkAdd: synchronous Add calls from many goroutines sharing one
// Client (one connection; concurrent calls are batched into shared writes),
// against an in-process frozen server on the same machine. One op is one
// Add round trip. callers is the number of calling goroutines.
func BenchmarkAdd(b *testing.B) {
	for _, per := range []int{1, 8, 64} {
		benchAdd(b, per, nil)
	}
}

// benchAdd is BenchmarkAdd with per callers per processor, on a server
// configured by mutate.
func benchAdd(b *testing.B, per int, mutate func(*server.Config)) {
	callers := per * runtime.GOMAXPROCS(0)
	b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
		ctx := context.Background()
		c := benchClient(b, mutate)
		var tid atomic.Uint64
		once := &AddOptions{Repeat: 1}
		b.ReportAllocs()
		b.SetParallelism(per)
		cpu0 := cpuTime(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := tid.Add(1)
				if _, err := c.Add(ctx, id%1024, id, 1_000_000, once); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkPipe: adds sent in Pipes of batch requests by 8 goroutines per
// processor sharing one Client, against an in-process frozen server. One
// op is one add.
func BenchmarkPipe(b *testing.B) {
	for _, batch := range []int{16, 256, 1000} {
		benchPipe(b, batch, nil)
	}
}

// benchPipe is BenchmarkPipe with Pipes of batch adds, on a server
// configured by mutate.
func benchPipe(b *testing.B, batch int, mutate func(*server.Config)) {
	b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
		pipeAdds(b, benchClient(b, mutate), batch, 0)
	})
}

// pipeAdds times b.N adds of new timers (tids after first) in Pipes of
// batch, by 8 goroutines per processor sharing c, and reports the
// process's CPU per add.
func pipeAdds(b *testing.B, c *Client, batch int, first uint64) {
	ctx := context.Background()
	var tid atomic.Uint64
	tid.Store(first)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	cpu0 := cpuTime(b)
	b.RunParallel(func(pb *testing.PB) {
		p := c.Pipeline()
		for pb.Next() {
			id := tid.Add(1)
			p.Add(id%1024, id, 1_000_000, nil)
			if p.Len() == batch {
				if err := p.Exec(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}
		if err := p.Exec(ctx); err != nil {
			b.Error(err)
		}
	})
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRequestIDsOn is BenchmarkPipe (batch=256) and BenchmarkAdd (8
// callers per processor) against a server with limits.max_request_ids
// 100000, a cluster node's default: the client sends a request id with
// every change and the server remembers them. (A single server's default,
// which BenchmarkPipe and BenchmarkAdd use, remembers none.)
func BenchmarkRequestIDsOn(b *testing.B) {
	b.Run("Pipe", func(b *testing.B) { benchPipe(b, 256, rememberIDs) })
	b.Run("Add", func(b *testing.B) { benchAdd(b, 8, rememberIDs) })
}

// BenchmarkRequestIDsOff is BenchmarkPipe (batch=256) and BenchmarkAdd
// (8 callers per processor) against a server with limits.max_request_ids
// -1: the client sends no request ids and the server remembers nothing,
// the path as it was before request ids.
func BenchmarkRequestIDsOff(b *testing.B) {
	off := func(c *server.Config) { c.Limits.MaxRequestIDs = -1 }
	b.Run("Pipe", func(b *testing.B) { benchPipe(b, 256, off) })
	b.Run("Add", func(b *testing.B) { benchAdd(b, 8, off) })
}

// benchClient returns a Client of a fresh in-process frozen server
// configured by mutate (nil: the tests' defaults), both closed when the
// benchmark ends.
func benchClient(b *testing.B, mutate func(*server.Config)) *Client {
	srv := startServer(b, mutate)
	c, err := Dial(context.Background(), srv.Addr(), WithLogger(discardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkPipeWarm is BenchmarkRequestIDsOff/Pipe against a wheel that
// already holds 1M timers: its b.N pipelined adds (up to 300,000) make
// its key index neither grow nor move, so what it measures is the add
// itself, where BenchmarkPipe into an empty server also pays for the
// index doubling under it (issue 26's incremental move). The 1M timers
// are added, and the cpu-ns/op clock started, before the first op.
func BenchmarkPipeWarm(b *testing.B) {
	const warm = 1_000_000
	if b.N > 300_000 {
		b.Skip("at most 300,000 adds: more would grow the index")
	}
	ctx := context.Background()
	c := benchClient(b, func(c *server.Config) { c.Limits.MaxRequestIDs = -1 })
	p := c.Pipeline()
	for id := uint64(1); id <= warm; id++ {
		p.Add(id%1024, id, 1_000_000, nil)
		if p.Len() == 1000 {
			if err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := p.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	pipeAdds(b, c, 256, warm)
}
