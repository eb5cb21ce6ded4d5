package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/session"
)

// TestHTTPAddrChecked: a config's http_addr must be host:port or off.
func TestHTTPAddrChecked(t *testing.T) {
	for addr, ok := range map[string]bool{"": true, "off": true, "127.0.0.1:7421": true, ":0": true,
		"7421": false, "localhost": false, "127.0.0.1:99999": false, "127.0.0.1:-1": false} {
		_, err := Config{HTTPAddr: addr}.withDefaults()
		if (err == nil) != ok {
			t.Errorf("http_addr %q: %v", addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), "http_addr") {
			t.Errorf("http_addr %q: the error does not name the key: %v", addr, err)
		}
	}
}

// TestListenAddrsChecked: every listen address in a config (addr,
// http_addr) must be a host:port a listener can use, so -config-check
// finds a port out of range or a malformed host before a start would fail;
// the error names the key.
func TestListenAddrsChecked(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:7420": true, ":0": true, "localhost:7420": true,
		"[::1]:7420": true, "[fe80::1%eth0]:7420": true, "game-1.example.com:7420": true, "0.0.0.0:65535": true,
		"127.0.0.1:99999": false, "127.0.0.1:65536": false, "127.0.0.1:-5": false, "127.0.0.1:": true,
		"127.0.0.1": false, "bad host:7420": false, "a..b:7420": false, "-x:7420": false} {
		for _, key := range []string{"addr", "http_addr"} {
			c := Config{Addr: "127.0.0.1:0"}
			if key == "addr" {
				c.Addr = addr
			} else {
				c.HTTPAddr = addr
			}
			_, err := c.withDefaults()
			if (err == nil) != ok {
				t.Errorf("%s %q: %v", key, addr, err)
			}
			var ce *ConfigError
			if err != nil && (!errors.As(err, &ce) || ce.Key != key) {
				t.Errorf("%s %q: the error does not name the key: %v", key, addr, err)
			}
		}
	}
}

// TestReadMetricsLateness: on a real-time clock, timers fire and each
// firing's lateness (tick boundary to the end of the turn that wrote it)
// is counted once, positive and well under a second; requests and bytes
// are counted; the load names the receiver.
func TestReadMetricsLateness(t *testing.T) {
	srv, err := New(Config{Addr: "127.0.0.1:0", Persistence: "off", AdminToken: "metrics-test-token", Metrics: true,
		Tick: 5 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr(), client.WithToken("metrics-test-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Bind(ctx, 9, nil); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for tid := uint64(1); tid <= n; tid++ {
		if _, err := c.Add(ctx, 9, tid, tid, nil); err != nil { // one a tick
			t.Fatal(err)
		}
	}
	m, err := srv.ReadMetrics(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Load.TopTimers) != 1 || m.Load.TopTimers[0].Receiver != 9 || m.Load.TopTimers[0].Timers+int(m.Stats.FiredTotal) != n {
		t.Errorf("top receivers by timers %+v (fired %d)", m.Load.TopTimers, m.Stats.FiredTotal)
	}
	for range n {
		select {
		case <-c.Events():
		case <-ctx.Done():
			t.Fatal("events did not come")
		}
	}
	m, err = srv.ReadMetrics(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	h := &m.Lateness
	if m.Stats.FiredTotal != n || h.Count != n {
		t.Fatalf("fired %d, lateness observations %d, want %d", m.Stats.FiredTotal, h.Count, n)
	}
	t.Logf("mean lateness %v over %d firings, buckets %v", time.Duration(h.Sum/n*1e9), h.Count, h.Counts)
	if h.Sum <= 0 || h.Sum/n > 1 {
		t.Errorf("mean lateness %v s: not a duration since a tick boundary", h.Sum/n)
	}
	if h.Counts[len(h.Counts)-1] != 0 {
		t.Errorf("a firing past the last bucket: %v", h.Counts)
	}
	if m.Requests["add"] != n || m.Requests["bind"] != 1 || m.Requests["hello"] != 1 {
		t.Errorf("requests %v", m.Requests)
	}
	if m.BytesIn == 0 || m.BytesOut == 0 || m.TurnDuration.Count == 0 || !m.Ready || m.Connections != 1 {
		t.Errorf("bytes in %d, out %d, turns %d, ready %v, connections %d", m.BytesIn, m.BytesOut, m.TurnDuration.Count,
			m.Ready, m.Connections)
	}
}

// BenchmarkTurnMetrics: what metrics add to an event-loop turn of a
// client's requests (whose start the turn reads anyway): off; on, a turn
// without firings (the clock read at its end, the turn histogram); on, a
// turn that fired timers (one more read, and a run of 100 firings into the
// lateness histogram).
func BenchmarkTurnMetrics(b *testing.B) {
	runs := []session.LateRun{{Late: 0, N: 100}}
	for _, tc := range []struct {
		name       string
		on, firing bool
	}{{"metrics=off", false, false}, {"metrics=on", true, false}, {"metrics=on/firing", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := New(Config{Addr: "127.0.0.1:0", Persistence: "off", AdminToken: "bench-token", Metrics: tc.on},
				slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.beginTurn(s.m.now) // any start: the turn reads it anyway
				s.endTurnMetrics()
				if tc.firing { // what endTurnMetrics does with the Core's runs
					s.observeLates(runs)
				}
			}
		})
	}
}
