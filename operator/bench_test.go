//go:build unix

package operator

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server"
)

// BenchmarkOverhead measures what the operator metrics cost the server:
// adds/s and fires/s through the public Client against an in-process
// server (frozen, in memory), with metrics off (Config.Metrics false, no
// listener) and on (Config.Metrics, the operator listener serving with
// its once-a-second sampler, and /metrics scraped every second, 15 times
// as often as Prometheus's default, by another process as Prometheus
// would: a scraper goroutine's timer in this process would make the
// client's many goroutine switches read the clock, a cost of the
// benchmark, not of the server). go test's -count repeats each
// sub-benchmark back to back, so on a busy machine run whole rounds in
// turn instead. Besides the rates each reports cpu-ns/op, the process's
// CPU time (user and system: the server, the client, and with metrics on
// the listener, sampler and scraper) per op, which other processes'
// load disturbs far less than wall time (docs/BENCHMARKS.md):
//
//	go test -c -o /tmp/operator.test ./operator
//	for i in 1 2 3 4 5 6; do /tmp/operator.test -test.run '^$' -test.bench 'Overhead$' -test.benchtime 500000x; done
//
// BenchmarkOverheadPaired below interleaves the two more finely.
func BenchmarkOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "metrics=off"
		if on {
			name = "metrics=on"
		}
		b.Run(name+"/add", func(b *testing.B) { benchAdd(b, on, 256) })
		b.Run(name+"/add-one-by-one", func(b *testing.B) { benchAdd(b, on, 1) })
		b.Run(name+"/fire", func(b *testing.B) { benchFire(b, on) })
	}
}

const benchToken = "bench-admin-token"

// benchServer starts a server, with the operator listener and a scraper
// when on, and a client with the admin token.
func benchServer(b *testing.B, on bool) *client.Client {
	c, _ := benchServerOf(b, on)
	return c
}

// benchServerOf is benchServer, also returning the server.
func benchServerOf(b *testing.B, on bool) (*client.Client, *server.Server) {
	b.Helper()
	cfg := server.Config{Addr: "127.0.0.1:0", Frozen: true, StartTick: 1_000_000, AdminToken: benchToken,
		Persistence: "off", Metrics: on}
	l := &cfg.Limits
	l.MaxTimers, l.MaxTimersPerReceiver = 1<<30, 1<<30
	l.MaxBacklog, l.MaxBacklogTotal, l.MaxBacklogBytes, l.MaxBacklogBytesTotal = 1<<30, 1<<30, 1<<40, 1<<40
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop(context.Background()) })
	if on {
		op, err := New(Options{Addr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		op.Attach(srv)
		if err := op.Serve(); err != nil {
			b.Fatal(err)
		}
		startScraper(b, "http://"+op.Addr()+"/metrics")
		b.Cleanup(func() { op.Close() })
	}
	c, err := client.Dial(context.Background(), srv.Addr(), client.WithToken(benchToken),
		client.WithLogger(slog.New(slog.DiscardHandler)), client.WithEventBuffer(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, srv
}

// addMany adds n one-shot timers, tids from first, due after ticks, over
// 64 receivers, inflight calls in flight (256 when 0 or absent).
func addMany(b *testing.B, c *client.Client, first uint64, n int, after uint64, inflight ...int) {
	b.Helper()
	ctx := context.Background()
	window := 256
	if len(inflight) > 0 && inflight[0] > 0 {
		window = inflight[0]
	}
	sem := make(chan struct{}, window)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func(tid uint64) {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.Add(ctx, tid%64, tid, after, nil); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}(first + uint64(i))
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// benchAdd times b.N adds with inflight calls in flight (1: a caller that
// waits for every reply, a loop turn per request).
func benchAdd(b *testing.B, on bool, inflight int) {
	c, srv := benchServerOf(b, on)
	turns0 := loopTurns(b, srv)
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime(b)
	addMany(b, c, 1, b.N, 1_000_000, inflight)
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "adds/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if on {
		b.ReportMetric(float64(loopTurns(b, srv)-turns0)/float64(b.N), "turns/op")
	}
}

// loopTurns returns how many loop turns srv has timed (with metrics on).
func loopTurns(b *testing.B, srv *server.Server) uint64 {
	m, err := srv.ReadMetrics(context.Background(), 0)
	if err != nil {
		b.Fatal(err)
	}
	return m.TurnDuration.Count
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchFire(b *testing.B, on bool) {
	c, srv := benchServerOf(b, on)
	ctx := context.Background()
	for r := range uint64(64) {
		if _, err := c.Bind(ctx, r, nil); err != nil {
			b.Fatal(err)
		}
	}
	addMany(b, c, 1, b.N, 1)
	turns0 := loopTurns(b, srv)
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime(b)
	ff := make(chan error, 1)
	go func() { // its reply follows the events, which wait for this reader
		_, _, err := c.FastForward(ctx, 1)
		ff <- err
	}()
	for range b.N {
		if ev := <-c.Events(); ev.Kind != client.Fire {
			b.Fatalf("event %v", ev.Kind)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "fires/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if err := <-ff; err != nil {
		b.Fatal(err)
	}
	if on {
		b.ReportMetric(float64(loopTurns(b, srv)-turns0)/float64(b.N), "turns/op")
	}
}

// BenchmarkOverheadPaired runs a server with metrics off and one with
// them on (listener, sampler, a scrape a second) side by side in one
// process and alternates chunks of 10,000 adds, or of 10,000 firings,
// between them, timing each chunk: both see the same background load, so
// on a shared machine the ratio is far steadier than separate runs'. It
// reports each server's rate and on/off, the rate with metrics on over
// the rate with them off (1 = no cost).
func BenchmarkOverheadPaired(b *testing.B) {
	b.Run("add", func(b *testing.B) { benchPaired(b, pairedAdd) })
	b.Run("fire", func(b *testing.B) { benchPaired(b, pairedFire) })
}

const pairChunk = 10_000

// pairedAdd times chunk adds of timers due far ahead.
func pairedAdd(b *testing.B, c *client.Client, first uint64) time.Duration {
	t0 := time.Now()
	addMany(b, c, first, pairChunk, 1_000_000)
	return time.Since(t0)
}

// pairedFire adds chunk timers due on the next tick (not timed), then
// times their firing: a fast-forward and reading every event.
func pairedFire(b *testing.B, c *client.Client, first uint64) time.Duration {
	ctx := context.Background()
	addMany(b, c, first, pairChunk, 1)
	t0 := time.Now()
	ff := make(chan error, 1)
	go func() {
		_, _, err := c.FastForward(ctx, 1)
		ff <- err
	}()
	for range pairChunk {
		if ev := <-c.Events(); ev.Kind != client.Fire {
			b.Fatalf("event %v", ev.Kind)
		}
	}
	d := time.Since(t0)
	if err := <-ff; err != nil {
		b.Fatal(err)
	}
	return d
}

func benchPaired(b *testing.B, chunk func(*testing.B, *client.Client, uint64) time.Duration) {
	off, on := benchServer(b, false), benchServer(b, true)
	ctx := context.Background()
	for _, c := range []*client.Client{off, on} {
		for r := range uint64(64) {
			if _, err := c.Bind(ctx, r, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	var tOff, tOn time.Duration
	b.ResetTimer()
	n := 0
	for first := uint64(1); n < b.N; first += pairChunk {
		if (first/pairChunk)%2 == 0 { // alternate which goes first
			tOff += chunk(b, off, first)
			tOn += chunk(b, on, first)
		} else {
			tOn += chunk(b, on, first)
			tOff += chunk(b, off, first)
		}
		n += 2 * pairChunk
	}
	ops := float64(n / 2)
	b.ReportMetric(ops/tOff.Seconds(), "off-ops/s")
	b.ReportMetric(ops/tOn.Seconds(), "on-ops/s")
	b.ReportMetric(tOff.Seconds()/tOn.Seconds(), "on/off")
}

// BenchmarkScrape: one /metrics scrape (the handler, without the
// network) of a server with 10,000 live timers over 100 receivers, and
// one ReadMetrics (what a scrape or the sampler costs the event loop,
// including the hand-over to it and back).
func BenchmarkScrape(b *testing.B) {
	c, srvOf := benchServerOf(b, true)
	addMany(b, c, 1, 10_000, 1_000_000)
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	op.Attach(srvOf)
	h := op.Handler()
	b.Run("metrics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != 200 {
				b.Fatalf("/metrics: %d", rec.Code)
			}
		}
	})
	b.Run("ReadMetrics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := srvOf.ReadMetrics(context.Background(), 10); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// startScraper starts this test binary again as a scraper of url, once a
// second (TestScraperChild), until the benchmark ends.
func startScraper(b *testing.B, url string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestScraperChild$")
	cmd.Env = append(os.Environ(), "TICKWHEEL_SCRAPE_URL="+url)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// TestScraperChild is the benchmarks' scraper process (startScraper): it
// fetches $TICKWHEEL_SCRAPE_URL once a second until killed. Without that
// variable it is skipped.
func TestScraperChild(t *testing.T) {
	url := os.Getenv("TICKWHEEL_SCRAPE_URL")
	if url == "" {
		t.Skip("the benchmarks' scraper process; it runs only when they start it")
	}
	for {
		if resp, err := http.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
}
