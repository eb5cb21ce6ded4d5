package loadtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
)

// Request id layout: the top byte says what the reply belongs to, the rest
// is the tid (add, cancel) or receiver (bind, cancel_all) or a sequence
// number (single calls).
const (
	idAdd uint64 = iota + 1
	idCancel
	idBind
	idClear
	idCall
	idShift = 56
	idMask  = 1<<idShift - 1
)

// TickwheelTarget drives a tickwheel server over TCP with the raw protocol:
// each worker is one connection, requests are pipelined on it (at most
// Window unanswered), and every receiver a worker adds timers for is bound
// (ephemeral) on that worker first, so its firings come back there.
//
// A timer due at instant d is added with after_ns, the time left until d
// when its request is written (or, with At, at the first tick whose
// boundary is at or after d by a calibration: see calibrate).
type TickwheelTarget struct {
	Addr   string
	Token  string // hello token (admin ops need the admin token unless on loopback)
	Window int    // unanswered requests per connection; default 4096 (1 = a caller waiting for each reply)
	Pid    int    // the server's pid when known (spawned), for Process
	Label  string // appended to the name in reports, e.g. "(fsync=always)"
	// NoBind adds timers without binding their receivers first: they are
	// not ephemeral, so they outlive the connection (and are not cleared).
	// For preloading a server with timers that stay.
	NoBind bool
	// At schedules a timer due at instant d by the absolute tick of the
	// calibration (the first boundary at or after d, as calibrated), the
	// way clients counted before add had after_ns. By default a timer is
	// added with after_ns = d − the instant its request is written, a
	// duration the server counts from the moment it reads the request: a
	// delivery before d is then the server firing early, whatever the
	// calibration says.
	At bool
	// Deliver, when > 0, binds each receiver on one of Deliver connections
	// of its own (receiver % Deliver) instead of on the worker that adds
	// its timers, so events come back on Deliver connections whatever the
	// number of workers. Deliver 1 is the Redis peer's topology, whose one
	// poller takes every due member for all the workers.
	Deliver int
	// TLS, when set, connects with TLS (a server with tls.cert_file).
	TLS *tls.Config
	// NoStamp reads with plain reads instead of recvmsg with the kernel's
	// receive stamps (which TLS connections cannot have), so that a
	// plaintext target is read the way a TLS one is; the "at the socket"
	// lateness figures are then missing.
	NoStamp bool

	tick  time.Duration
	sink  Sink
	conns []*twConn
	ctl   *twConn // admin and calibration calls
	// deliver are the Deliver connections; delivMu guards delivBound,
	// the receivers bound on them.
	deliver    []*twConn
	delivMu    sync.Mutex
	delivBound map[uint64]bool

	cal atomic.Pointer[calibration] // set by calibrate
}

// Name implements Target.
func (t *TickwheelTarget) Name() string { return "tickwheel" + t.Label }

// Tick implements Target; valid after Open.
func (t *TickwheelTarget) Tick() time.Duration { return t.tick }

// PID implements Process.
func (t *TickwheelTarget) PID() int { return t.Pid }

// Open implements Target.
func (t *TickwheelTarget) Open(ctx context.Context, conns int, sink Sink) error {
	if t.Window <= 0 {
		t.Window = 4096
	}
	t.sink = sink
	ctl, h, err := t.dial(ctx, -1)
	if err != nil {
		return err
	}
	t.ctl, t.tick = ctl, time.Duration(h.TickNs)
	for w := range conns {
		c, _, err := t.dial(ctx, w)
		if err != nil {
			t.Close()
			return err
		}
		t.conns = append(t.conns, c)
	}
	t.delivBound = map[uint64]bool{}
	for i := range t.Deliver {
		c, _, err := t.dial(ctx, conns+i)
		if err != nil {
			t.Close()
			return err
		}
		t.deliver = append(t.deliver, c)
	}
	return t.calibrate(ctx)
}

// Close implements Target. Receivers were bound ephemeral, so closing the
// connections also cancels whatever timers are left.
func (t *TickwheelTarget) Close() error {
	for _, c := range append(t.conns, t.deliver...) {
		c.close()
	}
	if t.ctl != nil {
		t.ctl.close()
	}
	t.conns, t.ctl, t.deliver = nil, nil, nil
	return nil
}

// dialConn opens a connection to the server, over TLS when t.TLS is set
// (its handshake done).
func (t *TickwheelTarget) dialConn(ctx context.Context) (net.Conn, error) {
	if t.TLS != nil {
		d := tls.Dialer{Config: t.TLS}
		return d.DialContext(ctx, "tcp", t.Addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", t.Addr)
}

func (t *TickwheelTarget) dial(ctx context.Context, w int) (*twConn, protocol.Hello, error) {
	var h protocol.Hello
	nc, err := t.dialConn(ctx)
	if err != nil {
		return nil, h, err
	}
	c := &twConn{nc: nc, noStamp: t.NoStamp, w: w, sink: t.sink, boundary: t.boundary, window: t.Window, bound: map[uint64]bool{}, waiters: map[uint64]chan reply{}, errs: map[string]int{}}
	c.cond = sync.NewCond(&c.mu)
	go c.readLoop()
	m, err := c.call(ctx, &protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "loadtest", Token: t.Token})
	if err == nil {
		err = protocol.DecodeHello(m.Result, &h)
	}
	if err != nil {
		c.close()
		return nil, h, fmt.Errorf("hello: %w", err)
	}
	return c, h, nil
}

// calibrate finds the server clock's tick boundaries on Now's clock. It
// asks for stats (admin) for a few ticks: the clock's target tick T read
// between instants g1 and g2 says boundary(T) <= g2 and boundary(T+1) > g1.
// The latest lower bound is kept, so that a timer put on the first tick
// whose boundary is at or after its due can never be processed before its
// due. (The server processes a tick when its ticker next wakes after the
// boundary: that delay is part of the measured lateness.)
func (t *TickwheelTarget) calibrate(ctx context.Context) error {
	tick := int64(t.tick)
	span := max(5*tick, int64(30*time.Millisecond))
	end := Now() + span
	var lo, hi int64
	var ref uint64
	for n := 0; Now() < end || n < 20; n++ {
		g1 := Now()
		m, err := t.ctl.call(ctx, &protocol.Request{Op: protocol.OpStats})
		if err != nil {
			return fmt.Errorf("calibrate (needs admin stats): %w", err)
		}
		g2 := Now()
		var st protocol.Stats
		if err := protocol.DecodeStats(m.Result, &st); err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		if st.Frozen || st.Speed != 1 {
			return fmt.Errorf("calibrate: the server clock must run at speed 1, unfrozen (frozen %v, speed %v)", st.Frozen, st.Speed)
		}
		if n == 0 {
			ref, lo, hi = st.Target, g1-tick, g2
			continue
		}
		d := int64(st.Target-ref) * tick // boundary(T) - boundary(ref)
		lo = max(lo, g1-d-tick)
		hi = min(hi, g2-d)
	}
	if hi < lo {
		return fmt.Errorf("calibrate: inconsistent clock readings (%d > %d)", lo, hi)
	}
	t.cal.Store(&calibration{refTick: ref, refTime: lo, err: time.Duration(hi - lo)})
	return nil
}

// calibration places the server's tick boundaries on Now's clock: tick
// refTick was seen processed at refTime at the earliest, within err.
type calibration struct {
	refTick uint64
	refTime int64
	err     time.Duration
}

// boundary is the instant (on Now's clock) of tick's boundary, or 0 before
// calibration.
func (t *TickwheelTarget) boundary(tick uint64) int64 {
	cal := t.cal.Load()
	if cal == nil {
		return 0
	}
	return cal.refTime + (int64(tick)-int64(cal.refTick))*int64(t.tick)
}

// CalibrationError is the width of the interval the tick boundaries are
// known to lie in.
func (t *TickwheelTarget) CalibrationError() time.Duration {
	if c := t.cal.Load(); c != nil {
		return c.err
	}
	return 0
}

// tickFor returns the first tick whose boundary is at or after instant due, and
// whether it is still in the future (else the add uses after=1).
func (t *TickwheelTarget) tickFor(due int64) (uint64, bool) {
	cal := t.cal.Load()
	rt, rtime := cal.refTick, cal.refTime
	at := t.tickAt(due, rt, rtime)
	now := rt + uint64(max(0, Now()-rtime)/int64(t.tick))
	return at, at > now+1
}

// tickAt is the first tick at or after instant due, given the calibration
// (tick rt was seen processed at rtime).
func (t *TickwheelTarget) tickAt(due int64, rt uint64, rtime int64) uint64 {
	tick := int64(t.tick)
	if d := due - rtime; d > 0 {
		return rt + uint64((d+tick-1)/tick)
	}
	return rt - uint64((rtime-due)/tick)
}

// Add implements Target.
func (t *TickwheelTarget) Add(ctx context.Context, w int, ts []Timer) (AddResult, error) {
	c := t.conns[w]
	c.begin()
	if err := t.bindDelivery(ctx, c, ts); err != nil {
		return AddResult{}, err
	}
	if t.Window < 256 {
		return t.addCallers(ctx, c, ts)
	}
	buf := c.wbuf[:0]
	n := 0
	flush := func() error {
		if err := c.acquire(n); err != nil {
			return err
		}
		if _, err := c.nc.Write(buf); err != nil {
			return err
		}
		buf, n = buf[:0], 0
		return ctx.Err()
	}
	var err error
	for i := range ts {
		tm := &ts[i]
		if !c.bound[tm.Receiver] && !t.NoBind {
			c.bound[tm.Receiver] = true
			buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpBind, ID: idBind<<idShift | tm.Receiver, Receiver: tm.Receiver, Ephemeral: true})
			n++
		}
		buf = protocol.AppendRequest(buf, t.addRequest(tm))
		n++
		if n >= 256 {
			if err = flush(); err != nil {
				break
			}
		}
	}
	if err == nil && n > 0 {
		err = flush()
	}
	c.wbuf = buf[:0]
	if werr := c.drain(); err == nil {
		err = werr
	}
	return AddResult{OK: c.okN, Errors: c.errs}, err
}

// bindDelivery binds, with Deliver set, the receivers of ts not bound yet
// on their delivery connection (a call each, the first time only), and
// marks them bound on worker c, whose Add then binds nothing: its Clear
// still cancels their timers.
func (t *TickwheelTarget) bindDelivery(ctx context.Context, c *twConn, ts []Timer) error {
	if len(t.deliver) == 0 || t.NoBind {
		return nil
	}
	for i := range ts {
		r := ts[i].Receiver
		if c.bound[r] {
			continue
		}
		t.delivMu.Lock()
		done := t.delivBound[r]
		t.delivBound[r] = true
		t.delivMu.Unlock()
		if !done {
			m, err := t.deliver[r%uint64(len(t.deliver))].call(ctx, &protocol.Request{Op: protocol.OpBind, Receiver: r, Ephemeral: true})
			if err == nil && m.Kind != protocol.KindOK {
				err = fmt.Errorf("bind %d: %s", r, m.Text)
			}
			if err != nil {
				return err
			}
		}
		c.bound[r] = true
	}
	return nil
}

// addCallers is Add with a window below 256: the connection carries Window
// callers, each with one request outstanding, each sending its next
// request as soon as its reply has been read. The requests of the callers
// freed by one read of replies go out in one write (as a client library
// that multiplexes callers on a connection batches them). With Window 1
// the connection is one caller waiting for every reply.
func (t *TickwheelTarget) addCallers(ctx context.Context, c *twConn, ts []Timer) (AddResult, error) {
	buf := c.wbuf[:0]
	var err error
	for i := 0; i < len(ts) && err == nil; {
		k := c.acquireUpTo(len(ts) - i + 64) // free callers (a bind takes a place too)
		if k == 0 {
			err = c.err
			break
		}
		buf = buf[:0]
		sent := 0
		for ; sent < k && i < len(ts); sent++ {
			tm := &ts[i]
			if !c.bound[tm.Receiver] && !t.NoBind {
				c.bound[tm.Receiver] = true
				buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpBind, ID: idBind<<idShift | tm.Receiver, Receiver: tm.Receiver, Ephemeral: true})
				continue
			}
			buf = protocol.AppendRequest(buf, t.addRequest(tm))
			i++
		}
		c.giveBack(k - sent)
		if _, err = c.nc.Write(buf); err == nil {
			err = ctx.Err()
		}
	}
	c.wbuf = buf[:0]
	if werr := c.drain(); err == nil {
		err = werr
	}
	return AddResult{OK: c.okN, Errors: c.errs}, err
}

// addRequest is the add request of a timer.
func (t *TickwheelTarget) addRequest(tm *Timer) *protocol.Request {
	req := &protocol.Request{Op: protocol.OpAdd, ID: idAdd<<idShift | tm.Tid&idMask, Receiver: tm.Receiver, Tid: tm.Tid, Repeat: uint64(tm.Repeat), Data: tm.Data}
	switch {
	case tm.AtTick != 0:
		req.At = tm.AtTick
	case !t.At:
		req.AfterNs = uint64(max(tm.Due-Now(), 1)) // the request is written after this instant
	default:
		if at, ok := t.tickFor(tm.Due); ok {
			req.At = at
		} else {
			req.After = 1
		}
	}
	if tm.Every > 0 {
		req.Every = uint64((tm.Every + t.tick - 1) / t.tick)
	}
	return req
}

// Cancel implements Target.
func (t *TickwheelTarget) Cancel(ctx context.Context, w int, ks []Key) ([]Key, error) {
	c := t.conns[w]
	c.begin()
	buf := c.wbuf[:0]
	var err error
	// Send in chunks of up to 256 requests with flow control.
	batch := min(256, t.Window)
	for lo := 0; lo < len(ks) && err == nil; lo += batch {
		hi := min(lo+batch, len(ks))
		for _, k := range ks[lo:hi] {
			buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpCancel, ID: idCancel<<idShift | k.Tid&idMask, Receiver: k.Receiver, Tid: k.Tid})
		}
		if err = c.acquire(hi - lo); err == nil {
			_, err = c.nc.Write(buf)
		}
		buf = buf[:0]
		if err == nil {
			err = ctx.Err()
		}
	}
	c.wbuf = buf
	if werr := c.drain(); err == nil {
		err = werr
	}
	// Receivers are unique per worker, so the tid identifies the key.
	out := make([]Key, 0, len(c.cancelled))
	recv := make(map[uint64]uint64, len(ks))
	for _, k := range ks {
		recv[k.Tid&idMask] = k.Receiver
	}
	for _, tid := range c.cancelled {
		out = append(out, Key{Receiver: recv[tid], Tid: tid})
	}
	return out, err
}

// Clear implements Target: cancel_all on every receiver bound.
func (t *TickwheelTarget) Clear(ctx context.Context) error {
	for _, c := range t.conns {
		c.begin()
		buf := c.wbuf[:0]
		n := 0
		for r := range c.bound {
			buf = protocol.AppendRequest(buf, &protocol.Request{Op: protocol.OpCancelAll, ID: idClear<<idShift | r, Receiver: r})
			n++
		}
		if n > 0 {
			if err := c.acquire(n); err != nil {
				return err
			}
			if _, err := c.nc.Write(buf); err != nil {
				return err
			}
		}
		c.wbuf = buf[:0]
		if err := c.drain(); err != nil {
			return err
		}
		if len(c.errs) > 0 {
			return fmt.Errorf("cancel_all: %v", c.errs)
		}
	}
	return nil
}

// Freeze implements Virtual: it returns the tick the frozen clock stays at.
func (t *TickwheelTarget) Freeze(ctx context.Context) (uint64, error) {
	m, err := t.ctl.call(ctx, &protocol.Request{Op: protocol.OpFreeze})
	if err != nil {
		return 0, err
	}
	v, err := protocol.DecodeUints(m.Result, nil)
	if err != nil || len(v) < 1 {
		return 0, fmt.Errorf("freeze: bad reply: %v", err)
	}
	// The reply holds the wheel's tick; the frozen clock's target may be a
	// tick or two ahead (an advance turn still queued), and timers up to
	// there will still fire without a fast-forward: report the target.
	st, err := t.Stats(ctx)
	if err != nil {
		return 0, err
	}
	return max(v[0], st.Target), nil
}

// Resume implements Virtual, and recalibrates (resuming moves the phase).
func (t *TickwheelTarget) Resume(ctx context.Context) error {
	if _, err := t.ctl.call(ctx, &protocol.Request{Op: protocol.OpResumeSync}); err != nil {
		return err
	}
	return t.calibrate(ctx)
}

// FastForward implements Virtual.
func (t *TickwheelTarget) FastForward(ctx context.Context, ticks uint64) (uint64, error) {
	m, err := t.ctl.call(ctx, &protocol.Request{Op: protocol.OpFastForward, Ticks: ticks})
	if err != nil {
		return 0, err
	}
	v, err := protocol.DecodeUints(m.Result, nil)
	if err != nil || len(v) < 2 {
		return 0, fmt.Errorf("fast_forward: bad reply: %v", err)
	}
	return v[1], nil
}

// Counters implements Counter from the server's admin stats.
func (t *TickwheelTarget) Counters(ctx context.Context) (Counters, error) {
	s, err := t.Stats(ctx)
	return Counters{Fired: s.FiredTotal, Dropped: s.DroppedTotal}, err
}

// Stats returns the server's stats (admin).
func (t *TickwheelTarget) Stats(ctx context.Context) (protocol.Stats, error) {
	var s protocol.Stats
	m, err := t.ctl.call(ctx, &protocol.Request{Op: protocol.OpStats})
	if err == nil {
		err = protocol.DecodeStats(m.Result, &s)
	}
	return s, err
}

// OpenIdle implements Idler: n connections that say hello and stay idle.
func (t *TickwheelTarget) OpenIdle(ctx context.Context, n int) (func(), error) {
	hello := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpHello, ID: 1, Version: protocol.Version, Name: "idle", Token: t.Token})
	conns := make([]net.Conn, n)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			buf := make([]byte, 4096)
			for i := range next {
				nc, err := t.dialConn(ctx)
				if err == nil {
					_, err = nc.Write(hello)
				}
				if err == nil { // read the hello reply: the session exists
					have := 0
					for err == nil {
						var k int
						k, err = nc.Read(buf[have:])
						have += k
						if _, _, ferr := protocol.SplitFrame(buf[:have], len(buf)); ferr == nil {
							break
						}
					}
				}
				if err != nil {
					if nc != nil {
						nc.Close()
					}
					select {
					case errs <- fmt.Errorf("idle connection %d: %w", i, err):
					default:
					}
					continue
				}
				conns[i] = nc
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	select {
	case err := <-errs:
		closeAll()
		return nil, err
	default:
	}
	return closeAll, nil
}

// DueInstant returns the boundary (on Now's clock) of the tick a timer
// intended for due is put on: the quantised due. Lateness after it is the
// server's own delay (its ticker's wake-up after the boundary included).
func (t *TickwheelTarget) DueInstant(due int64) int64 {
	cal := t.cal.Load()
	rt, rtime := cal.refTick, cal.refTime
	return rtime + int64(t.tickAt(due, rt, rtime)-rt)*int64(t.tick)
}

func (t *TickwheelTarget) sessions(ctx context.Context) (uint64, error) {
	s, err := t.Stats(ctx)
	return s.Sessions, err
}
