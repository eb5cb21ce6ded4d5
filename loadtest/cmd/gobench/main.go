// Command gobench measures the Go client's throughput against a
// running server, the same measurements as the TypeScript client's
// bench (clients/typescript/bench/bench.ts; clients/typescript/bench/run.sh
// runs both in one run):
//
//   - adds/s: n adds from -callers goroutines sharing one Client, each
//     with one add in flight (pipelined on one connection), and each
//     add's round trip (the Add call: request written, reply read) as
//     p50, p99, p99.9 and max in ms;
//   - fires/s: n one-shot timers over 64 receivers, all due on one tick
//     (added beforehand, not timed), fast-forwarded over, every event
//     read from Events.
//
// It prints one JSON line.
//
//	gobench -addr 127.0.0.1:7420 -token ADMIN_TOKEN [-n 200000] [-callers 128] [-ack none|auto]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/client"
)

const receivers = 64

func main() {
	addr := flag.String("addr", "127.0.0.1:7420", "server address")
	token := flag.String("token", "", "the server's admin token (fast_forward)")
	n := flag.Int("n", 200000, "adds, and events")
	callers := flag.Int("callers", 128, "concurrent callers")
	ack := flag.String("ack", "none", "fires: bind none or auto (acknowledged mode)")
	flag.Parse()
	if err := run(*addr, *token, *n, *callers, *ack); err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

func run(addr, token string, n, callers int, ackName string) error {
	mode := client.AckNone
	if ackName == "auto" {
		mode = client.AckAuto
	} else if ackName != "none" {
		return fmt.Errorf("-ack %q: want none or auto", ackName)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.WithToken(token), client.WithName("bench-go"), client.WithEventBuffer(1<<16))
	if err != nil {
		return err
	}
	defer c.Close()
	base := uint64(2_000_000_000) + uint64(os.Getpid())*10_000
	adds, rtt, err := measureAdds(ctx, c, base, n, callers)
	if err != nil {
		return err
	}
	fires, err := measureFires(ctx, c, base+5000, n, callers, mode)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"client": "go", "n": n, "callers": callers, "ack": ackName,
		"adds_per_s": int(adds), "fires_per_s": int(fires), "add_rtt_ms": rtt})
}

// addMany adds n one-shot timers (receiver base + i%spread, tid i+1, due
// after ticks) from callers goroutines; lat, when not nil (n long), gets
// each add's round trip.
func addMany(ctx context.Context, c *client.Client, base uint64, spread, n, callers int, after uint64, lat []time.Duration) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				t0 := time.Now()
				if _, err := c.Add(ctx, base+uint64(i)%uint64(spread), uint64(i)+1, after, nil); err != nil {
					errs <- err
					return
				}
				if lat != nil {
					lat[i] = time.Since(t0)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// measureAdds returns adds/s and the adds' round trips (quantiles in ms).
func measureAdds(ctx context.Context, c *client.Client, base uint64, n, callers int) (float64, map[string]float64, error) {
	lat := make([]time.Duration, n)
	t0 := time.Now()
	if err := addMany(ctx, c, base, 1024, n, callers, 1_000_000, lat); err != nil {
		return 0, nil, err
	}
	s := time.Since(t0).Seconds()
	for r := range uint64(1024) {
		if _, err := c.CancelAll(ctx, base+r); err != nil {
			return 0, nil, err
		}
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(n-1))].Microseconds()) / 1000 }
	return float64(n) / s, map[string]float64{"p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": q(1)}, nil
}

func measureFires(ctx context.Context, c *client.Client, base uint64, n, callers int, mode client.AckMode) (float64, error) {
	for r := range uint64(receivers) {
		if _, err := c.Bind(ctx, base+r, &client.BindOptions{Ack: mode}); err != nil {
			return 0, err
		}
	}
	if err := addMany(ctx, c, base, receivers, n, callers, 1, nil); err != nil {
		return 0, err
	}
	t0 := time.Now()
	ff := make(chan error, 1)
	go func() { // its reply follows the events, which wait for this reader
		_, _, err := c.FastForward(ctx, 1)
		ff <- err
	}()
	for got := 0; got < n; {
		select {
		case ev := <-c.Events():
			if ev.Kind == client.Fire {
				got++
			}
		case <-time.After(time.Minute):
			return 0, fmt.Errorf("events stopped after %d of %d", got, n)
		}
	}
	s := time.Since(t0).Seconds()
	if err := <-ff; err != nil {
		return 0, err
	}
	for r := range uint64(receivers) {
		if err := c.Unbind(ctx, base+r); err != nil {
			return 0, err
		}
	}
	return float64(n) / s, nil
}
