package loadtest

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: lateness in µs, 1µs..60s, 3 significant figures.
const (
	histMin = 1
	histMax = 60_000_000
	histSig = 3
)

// quantizer is implemented by ticked targets: the instant at which a timer
// intended for due is actually scheduled (its tick's processing instant).
type quantizer interface {
	DueInstant(due int64) int64
}

// collector records deliveries of timers with tids 1..n (tid i+1 is timer
// i). A timer fires at most 64 times in a scenario.
type collector struct {
	n         int
	every     int64 // interval between firings of each timer
	tolerance int64 // a delivery earlier than due - tolerance is early
	virtual   bool  // frozen-clock scenario: no lateness, no early check
	keep      bool  // keep every delivery's Sample (Params.KeepSamples)
	quant     quantizer
	sched     atomic.Bool // some delivery carried its Sched instant
	socket    atomic.Bool // some delivery carried its Socket instant

	seen      []atomic.Uint64 // per timer: bit k-1 set when firing k was received
	delivered atomic.Int64
	dups      atomic.Int64
	early     atomic.Int64
	unknown   atomic.Int64
	firstRecv atomic.Int64
	lastRecv  atomic.Int64

	shards []latShard
}

// The lateness histograms of a shard.
const (
	hRaw        = iota // receipt − intended due
	hOnTick            // receipt − the instant the target scheduled it at
	hSocket            // the socket's receive stamp − intended due
	hSocketTick        // the socket's receive stamp − the instant the target scheduled it at
	nHist
)

type latShard struct {
	mu                sync.Mutex
	h                 [nHist]*hdrhistogram.Histogram
	minRaw, minSocket int64
	samples           []Sample // with collector.keep
	_                 [64]byte
}

// Sample is one delivery of a scenario run with Params.KeepSamples: its
// intended due on Now's clock (WallOf gives the wall time) and its
// lateness and lateness after its tick (as Result's), ns.
type Sample struct {
	Due, Late, OnTick int64
}

// WallOf is the wall-clock time of instant ns of Now's clock.
func WallOf(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// samples is every shard's kept samples, in no order.
func (c *collector) samples() []Sample {
	if !c.keep {
		return nil
	}
	var out []Sample
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		out = append(out, s.samples...)
		s.mu.Unlock()
	}
	return out
}

func newCollector(n int, every time.Duration, tolerance time.Duration, tg Target) *collector {
	c := &collector{n: n, every: int64(every), tolerance: int64(tolerance), seen: make([]atomic.Uint64, n), shards: make([]latShard, 64)}
	c.quant, _ = tg.(quantizer)
	c.firstRecv.Store(1<<63 - 1)
	for i := range c.shards {
		for k := range c.shards[i].h {
			c.shards[i].h[k] = hdrhistogram.New(histMin, histMax, histSig)
		}
		c.shards[i].minRaw, c.shards[i].minSocket = 1<<63-1, 1<<63-1
	}
	return c
}

func dueData(due int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(due))
}

// sink is the Sink given to the target.
func (c *collector) sink(w int, d *Delivery) {
	i := d.Tid - 1
	if d.Tid == 0 || i >= uint64(c.n) || d.Fired == 0 || d.Fired > 64 || len(d.Data) != 8 {
		c.unknown.Add(1)
		return
	}
	bit := uint64(1) << (d.Fired - 1)
	if old := c.seen[i].Or(bit); old&bit != 0 {
		c.dups.Add(1)
		return
	}
	c.delivered.Add(1)
	for {
		v := c.lastRecv.Load()
		if d.Recv <= v || c.lastRecv.CompareAndSwap(v, d.Recv) {
			break
		}
	}
	for {
		v := c.firstRecv.Load()
		if d.Recv >= v || c.firstRecv.CompareAndSwap(v, d.Recv) {
			break
		}
	}
	if c.virtual {
		return
	}
	due := int64(binary.BigEndian.Uint64(d.Data)) + int64(d.Fired-1)*c.every
	late := d.Recv - due
	if late < -c.tolerance {
		c.early.Add(1)
	}
	var sched int64 // the instant the target scheduled it at, when known
	switch {
	case d.Sched != 0:
		sched = d.Sched
		c.sched.Store(true)
	case c.quant != nil:
		sched = c.quant.DueInstant(due)
	}
	onTick := late
	if sched != 0 {
		onTick = d.Recv - sched
	}
	s := &c.shards[w%len(c.shards)] // a worker's deliveries come from one goroutine: its shard stays warm
	s.mu.Lock()
	record(s.h[hRaw], late)
	record(s.h[hOnTick], onTick)
	s.minRaw = min(s.minRaw, late)
	if c.keep {
		s.samples = append(s.samples, Sample{Due: due, Late: late, OnTick: onTick})
	}
	if d.Socket != 0 {
		record(s.h[hSocket], d.Socket-due)
		s.minSocket = min(s.minSocket, d.Socket-due)
		if sched != 0 {
			record(s.h[hSocketTick], d.Socket-sched)
		}
	}
	s.mu.Unlock()
	if d.Socket != 0 && !c.socket.Load() {
		c.socket.Store(true)
	}
}

// record adds a lateness in ns to h (in µs; at least histMin).
func record(h *hdrhistogram.Histogram, ns int64) { h.RecordValue(max(histMin, ns/1000)) }

// missing counts expected firings not received: timer i should have fired
// want(i) times.
func (c *collector) missing(want func(i int) int) (missing int64) {
	for i := range c.n {
		got := c.seen[i].Load()
		for k := range want(i) {
			if got&(1<<k) == 0 {
				missing++
			}
		}
	}
	return missing
}

// Latency summarises a lateness histogram, in µs.
type Latency struct {
	Count                    int64
	P50, P90, P99, P999, Max int64
	Mean                     float64
	Min                      int64   `json:"min_raw_us"` // the smallest raw value (may be negative: early)
	WithinTarget             float64 `json:",omitempty"` // fraction at or below TargetUs
	TargetUs                 int64   `json:",omitempty"`
}

func summarize(h *hdrhistogram.Histogram, minRaw int64, target int64) *Latency {
	if h.TotalCount() == 0 {
		return nil
	}
	l := &Latency{Count: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9), Max: h.Max(), Mean: h.Mean(), Min: minRaw / 1000}
	if target > 0 {
		l.TargetUs = target
		var in int64
		for _, b := range h.Distribution() {
			if b.To <= target { // conservative: a bucket straddling the target counts as outside
				in += b.Count
			}
		}
		l.WithinTarget = float64(in) / float64(h.TotalCount())
	}
	return l
}

// Latencies are a scenario's lateness summaries (see Result).
type Latencies struct {
	Raw, OnTick, Socket, SocketOnTick *Latency
}

// latencies merges the shards: raw lateness (receipt − intended due); for a
// ticked target, lateness after the tick the timer was scheduled on (for
// beanstalkd: after the instant its rounded delay ended); and, when the
// target's reads carried the kernel's receive stamps, the same two at the
// socket.
func (c *collector) latencies(targetUs int64) Latencies {
	var m [nHist]*hdrhistogram.Histogram
	for k := range m {
		m[k] = hdrhistogram.New(histMin, histMax, histSig)
	}
	minRaw, minSocket := int64(1<<63-1), int64(1<<63-1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k := range m {
			m[k].Merge(s.h[k])
		}
		minRaw, minSocket = min(minRaw, s.minRaw), min(minSocket, s.minSocket)
		s.mu.Unlock()
	}
	l := Latencies{Raw: summarize(m[hRaw], minRaw, targetUs)}
	ticked := c.quant != nil || c.sched.Load()
	if ticked {
		l.OnTick = summarize(m[hOnTick], 0, 0)
	}
	if c.socket.Load() {
		l.Socket = summarize(m[hSocket], minSocket, targetUs)
		if ticked {
			l.SocketOnTick = summarize(m[hSocketTick], 0, 0)
		}
	}
	for _, t := range []*Latency{l.OnTick, l.SocketOnTick} {
		if t != nil {
			t.Min = 0
		}
	}
	return l
}
