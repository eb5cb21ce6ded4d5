package loadtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beanstalkd/go-beanstalk"
)

// BeanstalkdTarget is beanstalkd used as a timer service: a timer is a job
// put with a delay, made ready by the server when the delay has passed, and
// delivered by consumers that reserve and delete it.
//
//   - Capability limit: delays are whole seconds. A put's delay is
//     ceil((due − now) / 1 s), so a job never becomes ready before its due but
//     lateness includes up to 1 s of rounding; Tick reports 1 s, so repeat
//     periods (P ticks) are whole seconds too.
//   - Add: put on the worker's connection (go-beanstalk), Window puts in
//     flight at once per connection (go-beanstalk's Conn pipelines concurrent
//     requests in order). The job body carries worker, receiver, tid, the
//     first due, interval, repeat count, firings so far and the data.
//   - Delivery: Consumers connections, each a loop of reserve → deliver →
//     (for a repeating timer not at its last firing: put the next firing,
//     due from its scheduled instant) → delete. TTR is 60 s, so a job is
//     never released back before it is deleted.
//   - Cancel: delete by job id (the adapter keeps key → current job id). A
//     delayed or ready job is deleted (cancelled: it never fires); a job a
//     consumer has already reserved answers NOT_FOUND (not cancelled: it is
//     being delivered; a repeating one then goes on with its next firing).
//   - Clear: delete every job still known. Each Open uses a fresh tube.
type BeanstalkdTarget struct {
	Addr      string
	Pid       int // the server's pid when known, for Process
	Consumers int // reserve/delete connections; default 16
	Window    int // puts (or deletes) in flight per worker connection; default 64

	tube      string
	sink      Sink
	workers   []*bsWorker
	consumers []*beanstalk.Conn
	wg        sync.WaitGroup
	closing   atomic.Bool
	errMu     sync.Mutex
	err       error
}

type bsWorker struct {
	conn *beanstalk.Conn
	tube *beanstalk.Tube
	mu   sync.Mutex // guards jobs: the worker adds, consumers re-put and retire
	jobs map[Key]uint64
}

var bsOpens atomic.Int64

const bsTTR = 60 * time.Second

// BeanstalkdNote is the capability limit every beanstalkd result carries.
const BeanstalkdNote = "beanstalkd delays are whole seconds: each put's delay is rounded up to ceil((due-now)/1s), so its lateness includes up to 1 s of rounding (it never fires early); repeat periods are whole seconds (Tick = 1s)"

// Name implements Target.
func (b *BeanstalkdTarget) Name() string { return "beanstalkd" }

// Tick implements Target: whole seconds.
func (b *BeanstalkdTarget) Tick() time.Duration { return time.Second }

// PID implements Process.
func (b *BeanstalkdTarget) PID() int { return b.Pid }

// Notes is added to every result (the whole-second limit).
func (b *BeanstalkdTarget) Notes() []string { return []string{BeanstalkdNote} }

// Open implements Target.
func (b *BeanstalkdTarget) Open(ctx context.Context, conns int, sink Sink) error {
	if b.Consumers <= 0 {
		b.Consumers = 16
	}
	if b.Window <= 0 {
		b.Window = 64
	}
	b.tube = fmt.Sprintf("tickwheel-loadtest-%d-%d", os.Getpid(), bsOpens.Add(1))
	b.sink = sink
	b.closing.Store(false)
	b.err = nil
	b.workers, b.consumers = nil, nil
	dial := func() (*beanstalk.Conn, error) {
		c, err := beanstalk.DialTimeout("tcp", b.Addr, 2*time.Second)
		if err != nil {
			return nil, fmt.Errorf("beanstalkd %s: %w", b.Addr, err)
		}
		return c, nil
	}
	for range conns {
		c, err := dial()
		if err != nil {
			b.Close()
			return err
		}
		b.workers = append(b.workers, &bsWorker{conn: c, tube: beanstalk.NewTube(c, b.tube), jobs: map[Key]uint64{}})
	}
	for range b.Consumers {
		c, err := dial()
		if err != nil {
			b.Close()
			return err
		}
		b.consumers = append(b.consumers, c)
	}
	for _, c := range b.consumers {
		b.wg.Go(func() { b.consume(c) })
	}
	return ctx.Err()
}

// Job body: worker u16 | receiver u64 | tid u64 | first i64 (ns, Now's
// clock) | every i64 (ns) | repeat u32 | fired u32 (firings before this
// one) | ready i64 (the instant the put's whole-second delay ends) | data.
const bsHeader = 2 + 8 + 8 + 8 + 8 + 4 + 4 + 8

type bsJob struct {
	w             int
	receiver, tid uint64
	first, every  int64
	repeat, fired uint32
	ready         int64
	data          []byte
}

func (j *bsJob) encode() []byte {
	b := make([]byte, bsHeader, bsHeader+len(j.data))
	binary.BigEndian.PutUint16(b[0:], uint16(j.w))
	binary.BigEndian.PutUint64(b[2:], j.receiver)
	binary.BigEndian.PutUint64(b[10:], j.tid)
	binary.BigEndian.PutUint64(b[18:], uint64(j.first))
	binary.BigEndian.PutUint64(b[26:], uint64(j.every))
	binary.BigEndian.PutUint32(b[34:], j.repeat)
	binary.BigEndian.PutUint32(b[38:], j.fired)
	binary.BigEndian.PutUint64(b[42:], uint64(j.ready))
	return append(b, j.data...)
}

func (j *bsJob) decode(b []byte) bool {
	if len(b) < bsHeader {
		return false
	}
	*j = bsJob{w: int(binary.BigEndian.Uint16(b[0:])), receiver: binary.BigEndian.Uint64(b[2:]), tid: binary.BigEndian.Uint64(b[10:]),
		first: int64(binary.BigEndian.Uint64(b[18:])), every: int64(binary.BigEndian.Uint64(b[26:])),
		repeat: binary.BigEndian.Uint32(b[34:]), fired: binary.BigEndian.Uint32(b[38:]),
		ready: int64(binary.BigEndian.Uint64(b[42:])), data: b[bsHeader:]}
	return true
}

// due is the intended instant of the job's next firing.
func (j *bsJob) due() int64 { return j.first + int64(j.fired)*j.every }

// delayFor rounds the time until due up to whole seconds, and returns the
// instant that delay ends if the put is made now: the instant beanstalkd is
// asked to fire at (the rounding removed from lateness, as a ticked
// target's tick is).
func delayFor(due int64) (time.Duration, int64) {
	now := Now()
	d := due - now
	if d <= 0 {
		return 0, now
	}
	delay := time.Duration((d + int64(time.Second) - 1) / int64(time.Second) * int64(time.Second))
	return delay, now + int64(delay)
}

func (b *BeanstalkdTarget) fail(err error) {
	if b.closing.Load() {
		return
	}
	b.errMu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.errMu.Unlock()
}

func (b *BeanstalkdTarget) firstErr() error {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	return b.err
}

func (b *BeanstalkdTarget) consume(c *beanstalk.Conn) {
	ts := beanstalk.NewTubeSet(c, b.tube)
	put := beanstalk.NewTube(c, b.tube)
	var j bsJob
	var d Delivery
	for !b.closing.Load() {
		id, body, err := ts.Reserve(time.Second)
		if err != nil {
			if errors.Is(err, beanstalk.ErrTimeout) || errors.Is(err, beanstalk.ErrDeadline) {
				continue
			}
			b.fail(fmt.Errorf("beanstalkd reserve: %w", err))
			return
		}
		recv := Now()
		if !j.decode(body) || j.w >= len(b.workers) {
			b.fail(fmt.Errorf("beanstalkd: bad job body (%d bytes)", len(body)))
			_ = c.Delete(id)
			continue
		}
		j.fired++
		last := j.fired >= max(j.repeat, 1)
		d = Delivery{Receiver: j.receiver, Tid: j.tid, Fired: j.fired, Last: last, Recv: recv, Sched: j.ready, Data: j.data}
		b.sink(j.w, &d)
		wk, k := b.workers[j.w], Key{j.receiver, j.tid}
		if last {
			wk.mu.Lock()
			if wk.jobs[k] == id {
				delete(wk.jobs, k)
			}
			wk.mu.Unlock()
		} else {
			var delay time.Duration
			delay, j.ready = delayFor(j.due())
			nid, err := put.Put(j.encode(), 1024, delay, bsTTR)
			if err != nil {
				b.fail(fmt.Errorf("beanstalkd re-put: %w", err))
			} else {
				wk.mu.Lock()
				wk.jobs[k] = nid
				wk.mu.Unlock()
			}
		}
		if err := c.Delete(id); err != nil {
			b.fail(fmt.Errorf("beanstalkd delete %d: %w", id, err))
		}
	}
}

// inFlight runs f(i) for i in [0, n) from window goroutines sharing one
// connection, so that up to window requests are pipelined on it.
func inFlight(n, window int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(window, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// Add implements Target.
func (b *BeanstalkdTarget) Add(ctx context.Context, w int, ts []Timer) (AddResult, error) {
	res := AddResult{Errors: map[string]int{}}
	wk := b.workers[w]
	// Claim the keys first (duplicates are refused, as tickwheel does).
	todo := make([]int, 0, len(ts))
	wk.mu.Lock()
	for i := range ts {
		if ts[i].AtTick != 0 {
			wk.mu.Unlock()
			return res, fmt.Errorf("beanstalkd: no virtual time")
		}
		k := Key{ts[i].Receiver, ts[i].Tid}
		if _, dup := wk.jobs[k]; dup {
			res.Errors["exists"]++
			continue
		}
		wk.jobs[k] = 0
		todo = append(todo, i)
	}
	wk.mu.Unlock()
	var mu sync.Mutex
	var firstErr error
	inFlight(len(todo), b.Window, func(n int) {
		tm := &ts[todo[n]]
		if ctx.Err() != nil {
			return
		}
		j := bsJob{w: w, receiver: tm.Receiver, tid: tm.Tid, first: tm.Due, every: int64(tm.Every), repeat: max(tm.Repeat, 1), data: tm.Data}
		delay, ready := delayFor(tm.Due)
		j.ready = ready
		id, err := wk.tube.Put(j.encode(), 1024, delay, bsTTR)
		k := Key{tm.Receiver, tm.Tid}
		wk.mu.Lock()
		if err == nil {
			if wk.jobs[k] == 0 { // a fast consumer may already have re-put it
				wk.jobs[k] = id
			}
		} else {
			delete(wk.jobs, k)
		}
		wk.mu.Unlock()
		mu.Lock()
		if err != nil {
			res.Errors[err.Error()]++
			if firstErr == nil {
				firstErr = err
			}
		} else {
			res.OK++
		}
		mu.Unlock()
	})
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr == nil {
		firstErr = b.firstErr()
	}
	return res, firstErr
}

// Cancel implements Target.
func (b *BeanstalkdTarget) Cancel(ctx context.Context, w int, ks []Key) ([]Key, error) {
	wk := b.workers[w]
	ok := make([]bool, len(ks))
	var mu sync.Mutex
	var firstErr error
	inFlight(len(ks), b.Window, func(i int) {
		if ctx.Err() != nil {
			return
		}
		wk.mu.Lock()
		id, known := wk.jobs[ks[i]]
		wk.mu.Unlock()
		if !known || id == 0 {
			return
		}
		err := wk.conn.Delete(id)
		switch {
		case err == nil:
			ok[i] = true
			wk.mu.Lock()
			if wk.jobs[ks[i]] == id {
				delete(wk.jobs, ks[i])
			}
			wk.mu.Unlock()
		case errors.Is(err, beanstalk.ErrNotFound): // reserved by a consumer: being delivered
		default:
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	})
	var out []Key
	for i, k := range ks {
		if ok[i] {
			out = append(out, k)
		}
	}
	if firstErr == nil {
		firstErr = b.firstErr()
	}
	return out, firstErr
}

// Clear implements Target: deletes every job still known.
func (b *BeanstalkdTarget) Clear(ctx context.Context) error {
	return parallel(len(b.workers), func(w int) error {
		wk := b.workers[w]
		wk.mu.Lock()
		ids := make([]uint64, 0, len(wk.jobs))
		for k, id := range wk.jobs {
			if id != 0 {
				ids = append(ids, id)
			}
			delete(wk.jobs, k)
		}
		wk.mu.Unlock()
		var firstErr atomic.Pointer[error]
		inFlight(len(ids), b.Window, func(i int) {
			if err := wk.conn.Delete(ids[i]); err != nil && !errors.Is(err, beanstalk.ErrNotFound) {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
		if p := firstErr.Load(); p != nil {
			return *p
		}
		return ctx.Err()
	})
}

// Close implements Target.
func (b *BeanstalkdTarget) Close() error {
	b.closing.Store(true)
	for _, c := range b.consumers {
		c.Close()
	}
	b.wg.Wait()
	for _, wk := range b.workers {
		wk.conn.Close()
	}
	b.workers, b.consumers = nil, nil
	return nil
}
