package operator

import (
	"context"
	"sync"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

// The status page's history: once a second the sampler reads the server's
// counters (one ReadMetrics on the event loop) and keeps a sample in a
// ring of Options.History seconds, so a page opened during an incident
// shows the minutes before it.

// sample is one second of the status page's plots.
type sample struct {
	T          int64   `json:"t"`           // Unix seconds
	Fires      float64 `json:"fires"`       // firings per second over the last interval
	Adds       float64 `json:"adds"`        // add requests per second
	P50        float64 `json:"p50"`         // lateness of the interval's firings, seconds (see HasLatency)
	P99        float64 `json:"p99"`         // (estimated from the histogram's buckets, see quantile)
	Timers     uint64  `json:"timers"`      // live timers
	Sessions   uint64  `json:"sessions"`    // sessions
	Backlog    uint64  `json:"backlog"`     // queued events
	TwOffset   float64 `json:"tw_offset"`   // tw-time minus wall-clock time, seconds
	Dropped    float64 `json:"dropped"`     // events dropped per second
	Lost       float64 `json:"lost"`        // of Dropped, those lost with closed connections
	Errors     float64 `json:"errors"`      // error replies per second, all codes
	Refused    float64 `json:"refused"`     // connections refused per second
	Conns      int64   `json:"connections"` // open client connections
	Lag        float64 `json:"lag"`         // seconds
	HasLatency bool    `json:"has_latency"` // P50 and P99 are defined: something fired in the interval
}

// history is the ring of samples and the latest copy of the counters.
// Safe from any goroutine.
type history struct {
	mu      sync.Mutex
	ring    []sample
	next    int  // where the next sample goes
	full    bool // the ring has wrapped
	last    server.Metrics
	hasLast bool
	// idle says which source last was read from, and its Activity
	// before the read (a single server's; nil src: unknown): while the
	// source's Activity is still that, last is current but for the
	// clock's tw-time (statusJSON).
	idle struct {
		src      *Source
		activity uint64
	}
}

func newHistory(n int) *history { return &history{ring: make([]sample, max(n, 2))} }

// add derives a sample from m and the previous copy, and keeps m.
func (h *history) add(m server.Metrics) { h.addFrom(m, nil, 0) }

// addFrom is add of m read from src, whose Activity was activity before
// the read (src nil: not known).
func (h *history) addFrom(m server.Metrics, src *Source, activity uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idle.src, h.idle.activity = src, activity
	if h.hasLast {
		h.ring[h.next] = derive(&h.last, &m)
		h.next = (h.next + 1) % len(h.ring)
		h.full = h.full || h.next == 0
	}
	h.last, h.hasLast = m, true
}

// derive computes the sample of the interval from prev to cur.
func derive(prev, cur *server.Metrics) sample {
	dt := cur.Taken.Sub(prev.Taken).Seconds()
	if dt <= 0 {
		dt = 1
	}
	st := &cur.Stats
	s := sample{T: cur.Taken.Unix(), Timers: st.Timers, Sessions: st.Sessions, Backlog: st.BacklogEvents,
		Lag: float64(st.Lag) * cur.Tick.Seconds()}
	s.Fires = rate(prev.Stats.FiredTotal, st.FiredTotal, dt)
	s.Adds = rate(prev.Requests["add"], cur.Requests["add"], dt)
	s.Dropped = rate(prev.Counters.Dropped, cur.Counters.Dropped, dt)
	s.Lost = rate(prev.Counters.Lost, cur.Counters.Lost, dt)
	s.Refused = rate(prev.Refused, cur.Refused, dt)
	s.Conns = cur.Connections
	for code, n := range cur.Errors {
		s.Errors += rate(prev.Errors[code], n, dt)
	}
	twSeconds := float64(max(cur.Clock, st.Now)) * cur.Tick.Seconds()
	s.TwOffset = twSeconds - float64(cur.Taken.UnixNano())/1e9
	if d, ok := histDelta(&prev.Lateness, &cur.Lateness); ok {
		s.P50, s.P99, s.HasLatency = quantile(&d, 0.5), quantile(&d, 0.99), true
	}
	return s
}

// rate is the increase of a counter from prev to cur per second of dt (0
// when it went down: a server started again in this process).
func rate(prev, cur uint64, dt float64) float64 { return float64(cur-min(prev, cur)) / dt }

// histDelta returns cur minus prev, and whether it holds observations.
func histDelta(prev, cur *server.Histogram) (server.Histogram, bool) {
	if cur.Count <= prev.Count || len(prev.Counts) != len(cur.Counts) {
		return server.Histogram{}, false
	}
	d := server.Histogram{Bounds: cur.Bounds, Counts: make([]uint64, len(cur.Counts)), Count: cur.Count - prev.Count}
	for i := range cur.Counts {
		d.Counts[i] = cur.Counts[i] - min(prev.Counts[i], cur.Counts[i])
	}
	return d, true
}

// quantile estimates the q-quantile of h as Prometheus's
// histogram_quantile does: linearly within the bucket that holds it (the
// first bucket from 0; past the last bound, the last bound).
func quantile(h *server.Histogram, q float64) float64 {
	rank := q * float64(h.Count)
	var cum float64
	for i, n := range h.Counts {
		prevCum := cum
		cum += float64(n)
		if cum < rank || n == 0 {
			continue
		}
		if i == len(h.Bounds) {
			return h.Bounds[len(h.Bounds)-1]
		}
		lo := 0.0
		if i > 0 {
			lo = h.Bounds[i-1]
		}
		return lo + (h.Bounds[i]-lo)*(rank-prevCum)/float64(n)
	}
	return h.Bounds[len(h.Bounds)-1]
}

// samples returns the ring's samples, oldest first, and the latest
// counters (ok false before the first sample).
func (h *history) samples() ([]sample, server.Metrics, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []sample
	if h.full {
		out = append(out, h.ring[h.next:]...)
	}
	out = append(out, h.ring[:h.next]...)
	return out, h.last, h.hasLast
}

// current returns the latest counters as they are now, when src (the
// attached source) has been idle since they were read: its Activity the
// same, so only the clock moved, and tw-time is moved on by the time
// since (at the clock's speed; none while frozen) and Taken made now.
// Without that, the status page's tw-time and "updated" stood still for
// up to idleSampleEvery on an idle server whose clock runs. ok is false
// before the first sample.
func (h *history) current(src *Source) (m server.Metrics, ok bool) {
	h.mu.Lock()
	m, ok, idle := h.last, h.hasLast, h.idle
	h.mu.Unlock()
	if !ok || src == nil || idle.src != src {
		return m, ok
	}
	as, isAS := (*src).(activitySource)
	if !isAS {
		return m, ok
	}
	if a, known := as.Activity(); !known || a != idle.activity || m.Stats.Frozen || m.Tick <= 0 {
		return m, ok
	}
	if age := time.Since(m.Taken); age > 0 {
		m.Clock += uint64(age.Seconds() * m.Stats.Speed / m.Tick.Seconds())
		m.Taken = m.Taken.Add(age)
	}
	return m, ok
}

// idleSampleEvery is how often the sampler reads a server whose Activity
// has not changed: each read wakes the event loop, and on an idle server
// that wake was most of its CPU (docs/BENCHMARKS.md, "Idle CPU, the
// sampler's wake").
const idleSampleEvery = 10 * time.Second

// activitySource is a Source that says when it has been idle
// (server.Server.Activity), and can wake the sampler at its next activity
// (server.Server.ActivityAfter: a channel closed once Activity differs
// from n).
type activitySource interface {
	Activity() (n uint64, ok bool)
	ActivityAfter(n uint64) <-chan struct{}
}

// sample reads the attached server once a second until Close, or, while
// its Activity stays the same, once every idleSampleEvery: the plots then
// have one point per idleSampleEvery, and the first activity is sampled
// at once. While the server is idle the sampler sleeps (no wake-up a
// second: an idle server's CPU is its wake-ups).
func (o *Operator) sample() {
	defer close(o.done)
	t := time.NewTimer(time.Second)
	defer t.Stop()
	var last struct {
		src      *Source // o.src when it was read: an Attach since reads again
		activity uint64
		at       time.Time
	}
	for {
		o.looks.Add(1)
		wait, woken := time.Second, (<-chan struct{})(nil)
		if p := o.src.Load(); p != nil {
			src := *p
			as, _ := src.(activitySource)
			a, known := uint64(0), false
			if as != nil {
				a, known = as.Activity()
			}
			now := time.Now()
			changed := p != last.src || a != last.activity
			read := !known || changed || now.Sub(last.at) >= idleSampleEvery-time.Second/2
			failed := false
			if read {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				m, err := src.ReadMetrics(ctx, o.opts.Top)
				cancel()
				failed = err != nil
				if err == nil {
					if known {
						o.hist.addFrom(m, p, a)
					} else {
						o.hist.add(m)
					}
					last.src, last.activity, last.at = p, a, now
				}
			}
			// Idle: nothing happened in the second since the last look (or
			// since the last idle read). A read of a change waits a second
			// before the next look, so a busy server is read once a second;
			// so does a failed read (a stopped server fails at once).
			if known && !changed && !failed && p == last.src && a == last.activity {
				wait, woken = max(time.Until(last.at.Add(idleSampleEvery)), 0), as.ActivityAfter(a)
			}
		}
		t.Reset(wait)
		select {
		case <-o.stop:
			return
		case <-woken:
		case <-t.C:
		}
	}
}
