package operator

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
	"github.com/tickwheel/tickwheel/wheel"
)

// newTestOperator returns an operator for a frozen in-process server with
// metrics on, served by an httptest server (no sampler).
func newTestOperator(t *testing.T) (*servertest.Server, *httptest.Server) {
	t.Helper()
	ts := servertest.RunT(t, servertest.WithConfig(func(c *servertest.Config) { c.Metrics = true }))
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(ts.Server())
	hs := httptest.NewServer(op.Handler())
	t.Cleanup(hs.Close)
	return ts, hs
}

// scrape fetches /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value returns the value of the metric name with the given label pairs
// (a counter's or gauge's value, a histogram's count).
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("metric %s missing", name)
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("metric %s%v missing", name, labels)
	return 0
}

// TestMetricsMoveWithFirings adds timers, fires them by fast-forward and
// checks the counters exactly: adds, firings, the lateness histogram's
// count, errors by code, live timers.
func TestMetricsMoveWithFirings(t *testing.T) {
	ts, hs := newTestOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.Addr(), client.WithToken(ts.AdminToken()), client.WithEventBuffer(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Bind(ctx, 7, nil); err != nil {
		t.Fatal(err)
	}
	const n = 120
	for tid := uint64(1); tid <= n; tid++ {
		if _, err := c.Add(ctx, 7, tid, 1+tid%5, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Cancel(ctx, 7, 10_000); err == nil {
		t.Fatal("cancel of a timer that does not exist succeeded")
	}
	fams := scrape(t, hs.URL, "")
	for name, want := range map[string]float64{"tickwheel_timers": n, "tickwheel_fires_total": 0, "tickwheel_ready": 1,
		"tickwheel_fire_lateness_seconds": 0, "tickwheel_receivers": 1, "tickwheel_sessions": 1, "tickwheel_frozen": 1} {
		if got := value(t, fams, name); got != want {
			t.Errorf("before firing: %s = %v, want %v", name, got, want)
		}
	}
	if got := value(t, fams, "tickwheel_requests_total", "op", "add"); got != n {
		t.Errorf("requests_total{op=add} = %v, want %d", got, n)
	}
	if got := value(t, fams, "tickwheel_errors_total", "code", "not_found"); got != 1 {
		t.Errorf("errors_total{code=not_found} = %v, want 1", got)
	}
	ts.AdvanceTicks(10)
	for got := 0; got < n; got++ {
		select {
		case <-c.Events():
		case <-ctx.Done():
			t.Fatalf("%d events of %d", got, n)
		}
	}
	fams = scrape(t, hs.URL, "")
	for name, want := range map[string]float64{"tickwheel_timers": 0, "tickwheel_fires_total": n,
		"tickwheel_fire_lateness_seconds": n, "tickwheel_events_dropped_total": 0} {
		if got := value(t, fams, name); got != want {
			t.Errorf("after firing: %s = %v, want %v", name, got, want)
		}
	}
	if got := value(t, fams, "tickwheel_loop_turn_duration_seconds"); got == 0 {
		t.Error("no loop turn was timed")
	}
	if got := value(t, fams, "tickwheel_sent_bytes_total"); got == 0 {
		t.Error("sent_bytes_total did not move")
	}
	if got := value(t, fams, "tickwheel_received_bytes_total"); got == 0 {
		t.Error("received_bytes_total did not move")
	}
	// The Go runtime and process collectors are there too.
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}

// TestReadiness: /readyz is 503 before a server is attached and while it
// is not started, 200 while it serves, 503 once it stops; /healthz is 200
// throughout.
func TestReadiness(t *testing.T) {
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(op.Handler())
	defer hs.Close()
	check := func(path string, want int) {
		t.Helper()
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
	check("/healthz", 200)
	check("/readyz", 503)
	fams := scrape(t, hs.URL, "")
	if got := value(t, fams, "tickwheel_ready"); got != 0 {
		t.Fatalf("tickwheel_ready = %v before a server", got)
	}
	srv, err := server.New(server.Config{Addr: "127.0.0.1:0", Persistence: "off", AdminToken: "admin-token-for-tests"},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(srv)
	check("/readyz", 503) // recovered, not yet accepting
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	check("/readyz", 200)
	check("/healthz", 200)
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("/readyz", 503)
	check("/healthz", 200)
}

// TestTokenOnExposedAddress: beyond loopback every path but /healthz
// needs the admin token as a bearer token.
func TestTokenOnExposedAddress(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:7421": false, "localhost:0": false, "[::1]:7421": false,
		"0.0.0.0:7421": true, ":7421": true, "192.168.1.5:7421": true, "example.com:7421": true} {
		if got, err := Exposed(addr); err != nil || got != want {
			t.Errorf("Exposed(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := New(Options{Addr: "no-port"}); err == nil {
		t.Error("New accepted an address without a port")
	}
	ts := servertest.RunT(t)
	op, err := New(Options{Addr: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(op.Handler())
	defer hs.Close()
	get := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/metrics", ""); got != 503 {
		t.Errorf("/metrics before the token is known: %d, want 503", got)
	}
	op.Attach(ts.Server())
	for _, path := range []string{"/metrics", "/readyz", "/", "/status.json", "/debug/pprof/", "/assets/status.js"} {
		if got := get(path, ""); got != 401 {
			t.Errorf("%s without a token: %d, want 401", path, got)
		}
		if got := get(path, "wrong"); got != 401 {
			t.Errorf("%s with a wrong token: %d, want 401", path, got)
		}
		if got := get(path, ts.AdminToken()); got != 200 {
			t.Errorf("%s with the admin token: %d, want 200", path, got)
		}
	}
	if got := get("/healthz", ""); got != 200 {
		t.Errorf("/healthz without a token: %d, want 200", got)
	}
	fams := scrape(t, hs.URL, ts.AdminToken())
	if value(t, fams, "tickwheel_ready") != 1 {
		t.Error("tickwheel_ready is not 1")
	}
}

// TestPprof: the profiles' index is on the listener.
func TestPprof(t *testing.T) {
	_, hs := newTestOperator(t)
	resp, err := http.Get(hs.URL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "goroutine profile") {
		t.Fatalf("/debug/pprof/goroutine: %d %.200s", resp.StatusCode, b)
	}
}

// TestDurabilityMetrics: with the log on, its size and fsyncs show, and
// after a graceful restart (which writes a snapshot) the snapshot's age.
func TestDurabilityMetrics(t *testing.T) {
	ts := servertest.RunT(t, servertest.WithDataDir(t.TempDir()), servertest.WithConfig(func(c *servertest.Config) {
		c.Metrics, c.Fsync = true, "always"
	}))
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	op.Attach(ts.Server())
	hs := httptest.NewServer(op.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.Addr(), client.WithToken(ts.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for tid := uint64(1); tid <= 20; tid++ {
		if _, err := c.Add(ctx, 3, tid, 1000, nil); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, hs.URL, "")
	if got := value(t, fams, "tickwheel_persistence"); got != 1 {
		t.Fatalf("tickwheel_persistence = %v", got)
	}
	if got := value(t, fams, "tickwheel_log_bytes"); got <= 0 {
		t.Errorf("tickwheel_log_bytes = %v after 20 adds", got)
	}
	// 20 timers take no memory outside the heap; the gauge is there, and
	// is what the wheel package counts (no other test's wheel is mapped:
	// none in this package holds 2M timers).
	if got := value(t, fams, "tickwheel_wheel_mapped_bytes"); got != float64(wheel.MappedBytes()) {
		t.Errorf("tickwheel_wheel_mapped_bytes = %v, the wheel maps %d", got, wheel.MappedBytes())
	}
	if got := value(t, fams, "tickwheel_log_fsync_duration_seconds"); got < 1 {
		t.Errorf("%v fsyncs counted after 20 adds with fsync always", got)
	}
	ts.Restart() // a graceful stop writes a snapshot
	op.Attach(ts.Server())
	fams = scrape(t, hs.URL, "")
	if got := value(t, fams, "tickwheel_snapshot_age_seconds"); got < 0 || got > 60 {
		t.Errorf("tickwheel_snapshot_age_seconds = %v just after a restart", got)
	}
	if got := value(t, fams, "tickwheel_timers"); got != 20 {
		t.Errorf("tickwheel_timers = %v after the restart, want 20", got)
	}
	// Counters start again with the process; the replayed log is not counted.
	if got := value(t, fams, "tickwheel_requests_total", "op", "add"); got != 0 {
		t.Errorf("requests_total{op=add} = %v after a restart, want 0 (replays are not counted)", got)
	}
}
