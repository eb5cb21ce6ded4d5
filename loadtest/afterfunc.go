package loadtest

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// AfterFuncTarget is the hand-rolled in-process peer: each timer is a
// time.AfterFunc whose callback delivers to the sink and, for a repeating
// timer, re-arms itself from its scheduled instant (no drift). Timers live
// in 64 mutex-guarded shards keyed by (receiver, tid) so they can be
// cancelled; a cancel that wins the shard lock before the callback makes
// the callback deliver nothing, so a cancelled timer never fires.
type AfterFuncTarget struct {
	TickDur time.Duration // reported by Tick for ticks-based parameters; default 10ms

	sink   Sink
	shards [64]afShard
}

type afShard struct {
	mu     sync.Mutex
	timers map[Key]*afTimer
}

type afTimer struct {
	t       *time.Timer
	w       int
	key     Key
	next    int64 // intended instant of the next firing
	every   int64
	fired   uint32
	repeat  uint32
	data    []byte
	stopped bool
}

// Name implements Target.
func (a *AfterFuncTarget) Name() string { return "afterfunc" }

// Tick implements Target: AfterFunc has no quantum; TickDur only converts
// tick-based parameters (repeat periods) to durations.
func (a *AfterFuncTarget) Tick() time.Duration {
	if a.TickDur == 0 {
		return 10 * time.Millisecond
	}
	return a.TickDur
}

// Open implements Target.
func (a *AfterFuncTarget) Open(_ context.Context, _ int, sink Sink) error {
	a.sink = sink
	for i := range a.shards {
		a.shards[i].timers = map[Key]*afTimer{}
	}
	return nil
}

func (a *AfterFuncTarget) shard(k Key) *afShard {
	return &a.shards[(k.Tid^k.Receiver*0x9e3779b97f4a7c15)%uint64(len(a.shards))]
}

// Add implements Target.
func (a *AfterFuncTarget) Add(_ context.Context, w int, ts []Timer) (AddResult, error) {
	res := AddResult{Errors: map[string]int{}}
	for i := range ts {
		tm := &ts[i]
		if tm.AtTick != 0 {
			return res, fmt.Errorf("afterfunc: no virtual time")
		}
		k := Key{tm.Receiver, tm.Tid}
		s := a.shard(k)
		at := &afTimer{w: w, key: k, next: tm.Due, every: int64(tm.Every), repeat: max(tm.Repeat, 1), data: tm.Data}
		s.mu.Lock()
		if _, dup := s.timers[k]; dup {
			s.mu.Unlock()
			res.Errors["exists"]++
			continue
		}
		s.timers[k] = at
		at.t = time.AfterFunc(time.Duration(tm.Due-Now()), func() { a.fire(s, at) })
		s.mu.Unlock()
		res.OK++
	}
	return res, nil
}

func (a *AfterFuncTarget) fire(s *afShard, at *afTimer) {
	recv := Now()
	s.mu.Lock()
	if at.stopped {
		s.mu.Unlock()
		return
	}
	at.fired++
	d := Delivery{Receiver: at.key.Receiver, Tid: at.key.Tid, Fired: at.fired, Last: at.fired >= at.repeat, Recv: recv, Data: at.data}
	if d.Last {
		at.stopped = true
		delete(s.timers, at.key)
	} else {
		at.next += at.every
		at.t.Reset(time.Duration(at.next - Now()))
	}
	s.mu.Unlock()
	a.sink(at.w, &d)
}

// Cancel implements Target.
func (a *AfterFuncTarget) Cancel(_ context.Context, _ int, ks []Key) ([]Key, error) {
	var out []Key
	for _, k := range ks {
		s := a.shard(k)
		s.mu.Lock()
		if at, ok := s.timers[k]; ok {
			at.stopped = true
			at.t.Stop()
			delete(s.timers, k)
			out = append(out, k)
		}
		s.mu.Unlock()
	}
	return out, nil
}

// Clear implements Target.
func (a *AfterFuncTarget) Clear(context.Context) error {
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.Lock()
		for k, at := range s.timers {
			at.stopped = true
			at.t.Stop()
			delete(s.timers, k)
		}
		s.mu.Unlock()
	}
	return nil
}

// Close implements Target.
func (a *AfterFuncTarget) Close() error { return a.Clear(context.Background()) }
