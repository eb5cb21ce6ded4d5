package server_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server"
)

// TestBulkFigures measures the figures of docs/BENCHMARKS.md, "Bulk
// operations on 1M timers": cancel_all and pause_all of a group of 1M
// timers on a server running in real time (10 ms ticks, persistence on,
// fsync everysec), while an unrelated receiver has 100 timers firing
// every tick. For each, and for a baseline window without a bulk
// operation, it logs the time to complete, the longest loop turn (the
// turn histogram's bucket), and the unrelated receiver's fire lateness
// p99: measured at the client, as the event's arrival minus its tick's
// boundary (tick × 10 ms of Unix time, which a server whose start_tick is
// the default follows), less the least such delay of the run; and the
// server's lateness histogram's p99 bucket. Figures, not a check: run it
// with TICKWHEEL_BULK_FIGURES=1 (it takes about a minute; =v also logs
// the turn histogram), and TICKWHEEL_BULK_PER_TURN=N for another
// max_bulk_per_turn than the default.
func TestBulkFigures(t *testing.T) {
	if os.Getenv("TICKWHEEL_BULK_FIGURES") == "" {
		t.Skip("figures for docs/BENCHMARKS.md: set TICKWHEEL_BULK_FIGURES=1")
	}
	const (
		timers   = 1_000_000
		group    = 7
		other    = 999_999
		token    = "bulk-figures-admin-token"
		tickNs   = int64(10 * time.Millisecond)
		baseline = 3 * time.Second
	)
	cfg := server.Config{Addr: "127.0.0.1:0", AdminToken: token, DataDir: t.TempDir(), Metrics: true}
	cfg.Limits.MaxTimersPerReceiver = timers
	if n, err := strconv.Atoi(os.Getenv("TICKWHEEL_BULK_PER_TURN")); err == nil {
		cfg.Limits.MaxBulkPerTurn = n
	}
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var offsets []int64 // arrival - tick boundary, ns, of the unrelated receiver's events
	w, err := client.Dial(ctx, srv.Addr(), client.WithToken(token), client.WithEventBuffer(1<<16), client.WithHandler(func(ev client.Event) {
		if ev.Kind == client.Fire {
			at := time.Now().UnixNano()
			mu.Lock()
			offsets = append(offsets, at-int64(ev.Tick)*tickNs)
			mu.Unlock()
		}
	}))
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Bind(ctx, other, nil)
	require.NoError(t, err)
	for i := range uint64(100) {
		_, err := w.Add(ctx, other, i, 1, &client.AddOptions{Every: 1, Repeat: client.Forever})
		require.NoError(t, err)
	}
	c, err := client.Dial(ctx, srv.Addr(), client.WithToken(token))
	require.NoError(t, err)
	defer c.Close()

	fill := func() {
		start := time.Now()
		for base := uint64(0); base < timers; base += 10_000 {
			_, err := c.Pipelined(ctx, func(p *client.Pipe) error {
				for i := base; i < base+10_000; i++ {
					p.Add(1, i, 360_000, &client.AddOptions{Group: group}) // an hour away
				}
				return nil
			})
			require.NoError(t, err)
		}
		t.Logf("added %d timers in group %d in %v", timers, group, time.Since(start).Round(time.Millisecond))
	}
	type window struct {
		name      string
		took      time.Duration
		count     int
		offsets   []int64
		turnMax   float64 // the longest turn's bucket bound, s
		turns     []uint64
		serverP99 float64 // the server's lateness p99 bucket bound, s
	}
	var windows []window
	measure := func(name string, op func() int) {
		time.Sleep(500 * time.Millisecond) // let the fill's turns settle
		before, err := srv.ReadMetrics(ctx, 0)
		require.NoError(t, err)
		mu.Lock()
		from := len(offsets)
		mu.Unlock()
		start := time.Now()
		n := op()
		took := time.Since(start)
		time.Sleep(100 * time.Millisecond) // the events of the op's last ticks
		after, err := srv.ReadMetrics(ctx, 0)
		require.NoError(t, err)
		mu.Lock()
		win := append([]int64(nil), offsets[from:]...)
		mu.Unlock()
		turns := delta(after.TurnDuration, before.TurnDuration)
		late := delta(after.Lateness, before.Lateness)
		windows = append(windows, window{name: name, took: took, count: n, offsets: win, turns: turns,
			turnMax: maxBucket(turns, after.TurnDuration.Bounds), serverP99: quantileBucket(late, after.Lateness.Bounds, 0.99)})
	}
	measure("none (baseline)", func() int { time.Sleep(baseline); return 0 })
	fill()
	measure("cancel_all", func() int {
		n, err := c.CancelGroup(ctx, group)
		require.NoError(t, err)
		return n
	})
	fill()
	measure("pause_all", func() int {
		n, err := c.PauseGroup(ctx, group)
		require.NoError(t, err)
		return n
	})
	measure("none (baseline, 1M paused timers held)", func() int { time.Sleep(baseline); return 0 })

	mu.Lock()
	least := slices.Min(offsets)
	mu.Unlock()
	for _, win := range windows {
		lat := make([]int64, len(win.offsets))
		for i, o := range win.offsets {
			lat[i] = o - least
		}
		slices.Sort(lat)
		p := func(q float64) time.Duration { return time.Duration(lat[min(len(lat)-1, int(q*float64(len(lat))))]) }
		t.Logf("%-40s timers %7d  took %8v  longest turn <= %6.2f ms  unrelated receiver: %6d events, lateness p50 %v p99 %v max %v (server histogram p99 <= %.2f ms)",
			win.name, win.count, win.took.Round(time.Millisecond), win.turnMax*1000, len(lat),
			p(0.5).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond), time.Duration(lat[len(lat)-1]).Round(10*time.Microsecond), win.serverP99*1000)
		if os.Getenv("TICKWHEEL_BULK_FIGURES") == "v" {
			t.Logf("  turns per bucket (upper bound s): %v %v", server.TurnBuckets, win.turns)
		}
	}
}

// delta returns the counts of a less b, bucket by bucket.
func delta(a, b server.Histogram) []uint64 {
	out := make([]uint64, len(a.Counts))
	for i := range out {
		out[i] = a.Counts[i] - b.Counts[i]
	}
	return out
}

// maxBucket returns the upper bound of the highest non-empty bucket (the
// last bound for the overflow bucket).
func maxBucket(counts []uint64, bounds []float64) float64 {
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] > 0 {
			return bounds[min(i, len(bounds)-1)]
		}
	}
	return 0
}

// quantileBucket returns the upper bound of the bucket holding quantile q.
func quantileBucket(counts []uint64, bounds []float64, q float64) float64 {
	var total uint64
	for _, n := range counts {
		total += n
	}
	var seen uint64
	for i, n := range counts {
		seen += n
		if float64(seen) >= q*float64(total) {
			return bounds[min(i, len(bounds)-1)]
		}
	}
	return 0
}
