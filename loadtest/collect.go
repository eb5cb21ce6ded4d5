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
	quant     quantizer
	sched     atomic.Bool // some delivery carried its Sched instant

	seen      []atomic.Uint64 // per timer: bit k-1 set when firing k was received
	delivered atomic.Int64
	dups      atomic.Int64
	early     atomic.Int64
	unknown   atomic.Int64
	firstRecv atomic.Int64
	lastRecv  atomic.Int64

	shards []latShard
}

type latShard struct {
	mu          sync.Mutex
	raw, onTick *hdrhistogram.Histogram
	minRaw      int64
	_           [40]byte
}

func newCollector(n int, every time.Duration, tolerance time.Duration, tg Target) *collector {
	c := &collector{n: n, every: int64(every), tolerance: int64(tolerance), seen: make([]atomic.Uint64, n), shards: make([]latShard, 64)}
	c.quant, _ = tg.(quantizer)
	c.firstRecv.Store(1<<63 - 1)
	for i := range c.shards {
		c.shards[i].raw = hdrhistogram.New(histMin, histMax, histSig)
		c.shards[i].onTick = hdrhistogram.New(histMin, histMax, histSig)
		c.shards[i].minRaw = 1<<63 - 1
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
	onTick := late
	switch {
	case d.Sched != 0:
		onTick = d.Recv - d.Sched
		c.sched.Store(true)
	case c.quant != nil:
		onTick = d.Recv - c.quant.DueInstant(due)
	}
	s := &c.shards[w%len(c.shards)] // a worker's deliveries come from one goroutine: its shard stays warm
	s.mu.Lock()
	s.raw.RecordValue(max(histMin, late/1000))
	s.onTick.RecordValue(max(histMin, onTick/1000))
	s.minRaw = min(s.minRaw, late)
	s.mu.Unlock()
}

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

// latencies merges the shards: raw lateness (receipt − intended due) and,
// for a ticked target, lateness after the tick the timer was scheduled on
// (for beanstalkd: after the instant its rounded delay ended).
func (c *collector) latencies(targetUs int64) (raw, onTick *Latency) {
	r := hdrhistogram.New(histMin, histMax, histSig)
	t := hdrhistogram.New(histMin, histMax, histSig)
	minRaw := int64(1<<63 - 1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		r.Merge(s.raw)
		t.Merge(s.onTick)
		minRaw = min(minRaw, s.minRaw)
		s.mu.Unlock()
	}
	raw = summarize(r, minRaw, targetUs)
	if c.quant != nil || c.sched.Load() {
		onTick = summarize(t, 0, 0)
		if onTick != nil {
			onTick.Min = 0
		}
	}
	return raw, onTick
}
