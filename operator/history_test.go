package operator

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/servertest"
)

func TestQuantile(t *testing.T) {
	h := server.Histogram{Bounds: []float64{0.001, 0.002, 0.005}, Counts: []uint64{50, 40, 9, 1}, Count: 100}
	for _, tc := range []struct{ q, want float64 }{
		{0.25, 0.0005}, // in the first bucket, from 0
		{0.5, 0.001},   // the first bucket's top
		{0.7, 0.0015},  // halfway through the second
		{0.99, 0.005},  // the third's top
		{0.999, 0.005}, // past every bound: the last bound
	} {
		if got := quantile(&h, tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// metricsAt is a copy of the counters at second s, with fired firings all
// 1-2 ms late and adds add requests.
func metricsAt(s int, fired, adds uint64) server.Metrics {
	return server.Metrics{Taken: time.Unix(int64(1000+s), 0), Tick: 10 * time.Millisecond,
		Stats:    protocol.Stats{FiredTotal: fired, Now: 100_000 + uint64(s)*100, Timers: 7},
		Requests: map[string]uint64{"add": adds},
		Lateness: server.Histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{0, fired, 0}, Count: fired}}
}

func TestHistoryRing(t *testing.T) {
	h := newHistory(3)
	if s, _, ok := h.samples(); ok || len(s) != 0 {
		t.Fatalf("empty history: %v, %v", s, ok)
	}
	for i := range 6 {
		h.add(metricsAt(i, uint64(i*i*10), uint64(i*5)))
	}
	s, last, ok := h.samples()
	if !ok || last.Stats.FiredTotal != 250 {
		t.Fatalf("last copy %v, %v", last.Stats.FiredTotal, ok)
	}
	if len(s) != 3 {
		t.Fatalf("%d samples, want 3 (the ring's size)", len(s))
	}
	for k, smp := range s { // seconds 3, 4, 5: fired 50, 70, 90 more; 5 adds each
		i := k + 3
		if smp.T != int64(1000+i) || smp.Fires != float64(20*i-10) || smp.Adds != 5 || smp.Timers != 7 {
			t.Errorf("sample %d: %+v", i, smp)
		}
		if !smp.HasLatency || smp.P50 <= 0.001 || smp.P50 > 0.002 || smp.P99 <= smp.P50 || smp.P99 > 0.002 {
			t.Errorf("sample %d: p50 %v, p99 %v (every firing 1-2 ms late)", i, smp.P50, smp.P99)
		}
		// tw-time, 100,000 ticks of 10 ms plus 100 a second, keeps to
		// the wall clock, 1000 s plus a second a second: offset 0.
		if math.Abs(smp.TwOffset) > 1e-6 {
			t.Errorf("sample %d: tw offset %v, want 0", i, smp.TwOffset)
		}
	}
	// A second with no firings has no lateness.
	h.add(metricsAt(6, 250, 25))
	s, _, _ = h.samples()
	if smp := s[len(s)-1]; smp.HasLatency || smp.Fires != 0 {
		t.Errorf("a second without firings: %+v", smp)
	}
}

// TestHistoryDropsErrorsConnections: the page's drops, errors and
// connections plots get per-second rates of the counters (errors summed
// over codes, a code first seen counting from 0) and the open connections.
func TestHistoryDropsErrorsConnections(t *testing.T) {
	h := newHistory(4)
	m := metricsAt(0, 0, 0)
	m.Counters.Dropped, m.Counters.Lost, m.Refused, m.Connections = 10, 4, 1, 3
	m.Errors = map[string]uint64{"not_found": 5}
	h.add(m)
	m = metricsAt(2, 0, 0) // two seconds later
	m.Counters.Dropped, m.Counters.Lost, m.Refused, m.Connections = 30, 8, 7, 9
	m.Errors = map[string]uint64{"not_found": 9, "exists": 6}
	h.add(m)
	s, _, _ := h.samples()
	if len(s) != 1 {
		t.Fatalf("%d samples, want 1", len(s))
	}
	want := sample{Dropped: 10, Lost: 2, Refused: 3, Errors: 5, Conns: 9}
	if got := s[0]; got.Dropped != want.Dropped || got.Lost != want.Lost || got.Refused != want.Refused ||
		got.Errors != want.Errors || got.Conns != want.Conns {
		t.Errorf("sample %+v, want dropped/s 10, lost/s 2, refused/s 3, errors/s 5, connections 9", got)
	}
}

// countingSource counts the ReadMetrics calls made of a server.
type countingSource struct {
	*server.Server
	reads atomic.Int64
}

func (c *countingSource) ReadMetrics(ctx context.Context, top int) (server.Metrics, error) {
	c.reads.Add(1)
	return c.Server.ReadMetrics(ctx, top)
}

// sampledServer is a test server with an operator serving it, whose
// reads of the server are counted; the operator closes with the test.
func sampledServer(t *testing.T) (*servertest.Server, *Operator, *countingSource) {
	ts := servertest.RunT(t)
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{Server: ts.Server()}
	op.Attach(src)
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	return ts, op, src
}

// TestSamplerLeavesAnIdleServerAlone: the sampler reads an idle server
// (its Activity the same) once, not once a second, since each read wakes
// the event loop (most of an idle server's CPU), and does not itself wake
// each second to look; the first request after it is sampled at once.
// Before, it read the server every second, and later looked every second.
func TestSamplerLeavesAnIdleServerAlone(t *testing.T) {
	ts, op, src := sampledServer(t)
	time.Sleep(1500 * time.Millisecond) // the start's own turns
	n0, l0 := src.reads.Load(), op.looks.Load()
	time.Sleep(3 * time.Second)
	if n := src.reads.Load(); n != n0 {
		t.Fatalf("an idle server was read %d times in 3 s, want none", n-n0)
	}
	if n := op.looks.Load(); n-l0 > 1 {
		t.Fatalf("the sampler woke %d times in 3 s of an idle server, want 1 at most", n-l0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.Addr(), client.WithToken(ts.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Add(ctx, 1, 1, 100, nil); err != nil {
		t.Fatal(err)
	}
	// (The connection's accept alone may be sampled first, before the
	// add: wait for a sample with the timer, not for any read.)
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, last, _ := op.hist.samples()
		if last.Stats.Timers == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last sample holds %d timers 3 s after the add, want 1 (%d reads)", last.Stats.Timers, src.reads.Load()-n0)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idleSource is a single server that stays idle: its counters were read
// at taken, tw-time 1000 at a 10 ms tick, running at speed 1.
type idleSource struct {
	taken    time.Time
	activity atomic.Uint64
	reads    atomic.Int64
	pokes    atomic.Int64
}

func (s *idleSource) Poke() { s.pokes.Add(1) }

func (s *idleSource) ReadMetrics(context.Context, int) (server.Metrics, error) {
	s.reads.Add(1)
	m := server.Metrics{Taken: s.taken, Ready: true, Tick: 10 * time.Millisecond, Clock: 1000}
	m.Stats.Now, m.Stats.Speed = 1000, 1
	return m, nil
}
func (s *idleSource) Ready() bool                   { return true }
func (s *idleSource) ReadOnly() string              { return "" }
func (s *idleSource) AdminToken() string            { return "" }
func (s *idleSource) Activity() (n uint64, ok bool) { return s.activity.Load(), true }

// ActivityAfter is closed at once if Activity moved past n; else never (the
// test only reads the status page after a change).
func (s *idleSource) ActivityAfter(n uint64) <-chan struct{} {
	c := make(chan struct{})
	if s.activity.Load() != n {
		close(c)
	}
	return c
}

// TestStatusIdleServerTwTimeMoves: /status.json shows an idle server's
// tw-time as it is now, not as it was at the last read, which the sampler
// makes only every idleSampleEvery on an idle server: the page's clock
// stood still for up to 10 s, then jumped. Once the server is active
// again (Activity changed) the sample is shown as read.
func TestStatusIdleServerTwTimeMoves(t *testing.T) {
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	src := &idleSource{taken: time.Now().Add(-5 * time.Second)} // read 5 s ago
	op.Attach(src)
	if err := op.Serve(); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	for _, _, ok := op.hist.samples(); !ok; _, _, ok = op.hist.samples() {
		time.Sleep(10 * time.Millisecond)
	}
	get := func() (now uint64, taken time.Time) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/status.json", nil)
		req.Host = "127.0.0.1"
		op.Handler().ServeHTTP(rec, req)
		var st struct {
			Now   string `json:"now"`
			Taken int64  `json:"taken_ms"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err, rec.Body.String())
		}
		n, err := strconv.ParseUint(st.Now, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n, time.UnixMilli(st.Taken)
	}
	now, taken := get()
	if now < 1500 || now > 1600 || time.Since(taken) > time.Second {
		t.Fatalf("idle: tw-time %d taken %v ago, want about 1500 (5 s of 10 ms ticks after 1000) now", now, time.Since(taken))
	}
	src.activity.Add(1) // a request since the read: the sample is shown as read until the next
	if now, _ := get(); now != 1000 {
		t.Fatalf("active: tw-time %d, want the sample's 1000", now)
	}
}

// TestSamplerRestsOnAStoppedServer: cmd/tickwheel keeps the operator
// attached while srv.Stop runs (its last snapshot may take a while). Once
// the server's engine has shut down, ReadMetrics fails at once and Activity
// no longer moves; the sampler waits a second after a failed read. Before,
// once idleSampleEvery had passed since the last good read, it looked and
// read again at once, forever (267,028 times in a second: found by a
// red-team pass).
func TestSamplerRestsOnAStoppedServer(t *testing.T) {
	ts, op, src := sampledServer(t)
	time.Sleep(1500 * time.Millisecond) // a first good read
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Server().Stop(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idleSampleEvery) // past the idle read's due time
	n0, l0 := src.reads.Load(), op.looks.Load()
	time.Sleep(1 * time.Second)
	reads, looks := src.reads.Load()-n0, op.looks.Load()-l0
	t.Logf("in 1 s after the server stopped: %d ReadMetrics calls, %d sampler looks", reads, looks)
	if looks > 5 {
		t.Fatalf("the sampler spins on a stopped server: %d looks and %d reads in 1 s (the old ticker: 1)", looks, reads)
	}
}

// TestRequestsPokeTheServer: every HTTP request served pokes the attached
// server once (its idle memory returner then looks at the garbage the
// request made), a refused one too.
func TestRequestsPokeTheServer(t *testing.T) {
	op, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	src := &idleSource{taken: time.Now()}
	op.Attach(src)
	for _, path := range []string{"/healthz", "/metrics", "/status.json", "/nope"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1"
		op.Handler().ServeHTTP(rec, req)
	}
	if n := src.pokes.Load(); n != 4 {
		t.Fatalf("%d pokes for 4 requests", n)
	}
}
