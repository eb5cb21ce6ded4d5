package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// The chaos tests run the real server over TCP with many clients closing at
// the worst moments: while events are being written to them, with unread
// data (the kernel then resets the connection), with SO_LINGER 0, mid-frame.
// Chaos clients run on goroutines, so they use chaosConn, which returns
// errors instead of failing the test; the watcher reads with rawClient.read,
// which does not touch testing.T either.

// TestCrashCloseWhileWriting is the regression test for the crash fixed in
// 4469f30: 50 sessions with a timer firing every tick all close at once while
// their events are being written, half with SO_LINGER 0 and half with a plain
// close and unread data (both make the kernel send RST). A write to a reset
// peer ran OnClose inside Write, whose flush emptied the dirty list under the
// running flush: a nil session panic that killed the server. After each round
// the server must still serve, and hold nothing of the closed sessions.
func TestCrashCloseWhileWriting(t *testing.T) {
	const sessions, rounds = 50, 10
	srv := startServer(t, func(c *Config) { c.Frozen = false; c.Tick = time.Millisecond })
	admin := helloClient(t, srv, "admin")
	for round := range rounds {
		conns := make([]*chaosConn, sessions)
		for i := range conns {
			c, err := chaosDial(srv.Addr(), 0)
			require.NoError(t, err)
			conns[i] = c
			// Pipelined, so that the sessions start within a few ticks.
			b := c.append(nil, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "crash"})
			b = c.append(b, protocol.Request{Op: protocol.OpBind, Receiver: uint64(i + 1), Ephemeral: true})
			b = c.append(b, protocol.Request{Op: protocol.OpAdd, Receiver: uint64(i + 1), Tid: 1, After: 1}) // every tick
			require.NoError(t, c.write(b))
			require.NoError(t, c.awaitReplies(time.Now().Add(ioTimeout)), "session %d", i)
			if i%2 == 0 {
				require.NoError(t, c.c.SetLinger(0))
			}
		}
		// Stop reading: events pile up unread in every socket, then all close.
		time.Sleep(30 * time.Millisecond)
		for _, c := range conns {
			c.c.Close()
		}
		chaosProbe(t, srv)
		st, ok := chaosSettled(admin, 15*time.Second, func(s protocol.Stats) bool {
			return s.Sessions == 1 && s.Timers == 0 && s.Receivers == 0 && s.BacklogEvents == 0
		})
		require.True(t, ok, "the server holds sessions, timers or receivers of closed sessions: %+v", st)
		t.Logf("round %d: %d sessions closed while written to; the server serves", round+1, sessions)
	}
}

// chaosProbe checks that the server serves: a new session says hello, adds
// a timer and gets its event.
func chaosProbe(t *testing.T, srv *Server) {
	t.Helper()
	c := dial(t, srv)
	defer c.conn.Close()
	c.wait = chaosStall // the server may still be working off the run's load
	c.sayHello("probe", srv.AdminToken())
	const recv = 4_000_000_000
	c.bind(recv, true)
	c.add(protocol.Request{Receiver: recv, Tid: 1, After: 1, Repeat: 1})
	for len(c.events) == 0 {
		m, err := c.read()
		require.NoError(t, err, "waiting for the probe's event")
		c.events = append(c.events, m)
	}
	fs := c.fires()
	require.Len(t, fs, 1)
	assert.Equal(t, uint64(recv), fs[0].Receiver)
	assert.True(t, fs[0].Last)
}

// chaosSettled polls the server's stats, with a pause between calls, until
// cond holds or within has passed; it returns the last stats and whether
// cond held.
func chaosSettled(admin *rawClient, within time.Duration, cond func(protocol.Stats) bool) (protocol.Stats, bool) {
	deadline := time.Now().Add(within)
	for {
		s := admin.stats()
		if cond(s) || time.Now().After(deadline) {
			return s, cond(s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The chaos test's shape. Timers fire every tick; clients live up to
// chaosMaxLife (silent ones up to chaosSilentLife, long enough for the
// server to hold some of their events back at max_outbound).
const (
	chaosClients    = 200
	chaosTick       = 2 * time.Millisecond
	chaosPool       = 100       // shared receivers 1..chaosPool: taken over, left with backlogs, rebound
	chaosEphBase    = 1_000_000 // ephemeral receivers: a fresh id each
	chaosWatchRecv  = 900_000   // the well-behaved session's receiver
	chaosWatchEvery = 10        // its timer's interval, in ticks
	chaosMaxLife    = 1500 * time.Millisecond
	chaosSilentLife = 4 * time.Second
	// chaosStall bounds the waits for what the server owes a client that
	// reads (a leave's replies, the watcher's next event, the probe's
	// replies): waiting this long is a stall, a failure. It is not
	// ioTimeout: the run saturates the machine by design, and under
	// -race on a loaded 2-core machine (load 10-25) the clients read
	// seconds behind the server (watcher gaps of 3 s; leaves whose
	// replies, queued behind a second of events, took over 5 s), though
	// every reply and event does come.
	chaosStall = 30 * time.Second
)

// chaosDuration is 30 s under -short (what CI runs, with -race), 40 s
// otherwise; TICKWHEEL_CHAOS_DURATION overrides both (e.g. 10m for a soak).
func chaosDuration(t *testing.T) time.Duration {
	if v := os.Getenv("TICKWHEEL_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "TICKWHEEL_CHAOS_DURATION")
		return d
	}
	if testing.Short() {
		return 30 * time.Second
	}
	return 40 * time.Second
}

// TestChaos runs chaosClients clients against the real server for
// chaosDuration. Each connects, says hello, binds one or two receivers
// (shared ones, so takeovers happen, or fresh ephemeral ones), adds timers
// firing every tick, reads for a random while and disconnects: a quarter
// with RST (SO_LINGER 0), some after writing half a request, some having
// never read anything (with a small receive buffer and 2 KiB of data per
// event: the server holds their events back once max_outbound bytes wait,
// and counts those it loses when they go), some after cancelling and
// unbinding; then it connects again. Every client checks what it reads:
// whole frames, replies in request order, no event for a receiver it does
// not hold, per receiver seq increasing and skipping only what its bind
// reported dropped (a client that reads is never held back, so no event of
// its receivers can be dropped while it holds them). Meanwhile one
// well-behaved session's timer fires every chaosWatchEvery ticks: its
// events must keep arriving, in order with no seq gap.
//
// Afterwards the server serves; once the shared receivers are cleaned up
// its counts are the watcher's and the admin's; goroutines, open fds and
// the heap return to their baseline.
func TestChaos(t *testing.T) {
	d := chaosDuration(t)
	srv := startServer(t, func(c *Config) {
		c.Frozen = false
		c.Tick = chaosTick
		c.Limits.MaxOutbound = 1 << 20
	})
	admin := helloClient(t, srv, "admin")
	admin.wait = chaosStall // its stats calls follow the run
	w := startChaosWatcher(t, srv)
	baseG, baseFD, baseHeap := len(chaosGoroutines()), chaosFDs(), chaosHeap()

	seed := rand.Uint64()
	t.Logf("seed %d, %d clients for %v, tick %v", seed, chaosClients, d, chaosTick)
	began := time.Now()
	run := &chaosRun{addr: srv.Addr(), end: began.Add(d)}
	var wg sync.WaitGroup
	for i := range chaosClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for time.Now().Before(run.end) {
				run.session(rng)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	run.log.check(t)
	w.log.check(t)
	require.Positive(t, w.events.Load(), "the watcher got events")

	chaosProbe(t, srv)
	st, ok := chaosSettled(admin, 30*time.Second, func(s protocol.Stats) bool { return s.Sessions == 2 })
	require.True(t, ok, "sessions left: %+v", st)
	chaosCleanup(t, admin)
	st, ok = chaosSettled(admin, 30*time.Second, func(s protocol.Stats) bool {
		return s.Sessions == 2 && s.Connections == 2 && s.Receivers == 1 && s.Timers == 1 && s.BacklogEvents == 0
	})
	require.True(t, ok, "the server's counts, want those of the watcher and the admin: %+v\nreceiver records left: %q",
		st, chaosLeftovers(t, srv, chaosWatchRecv))
	chaosBaseline(t, baseG, baseFD, baseHeap)
	w.log.check(t)
	t.Logf("chaos: %v, %d connections (%d RST, %d mid-frame, %d never reading, %d cancelled and unbound), "+
		"%d readers closed by the server, %d events to clients, %d takeovers, longest leave %v; watcher %d events, longest gap %v; "+
		"server fired %d, dropped or lost %d",
		elapsed.Round(time.Millisecond), run.conns.Load(), run.rsts.Load(), run.midFrame.Load(), run.silent.Load(),
		run.graceful.Load(), run.serverClosed.Load(), run.events.Load(), run.takeovers.Load(),
		time.Duration(run.maxLeave.Load()).Round(time.Millisecond),
		w.events.Load(), time.Duration(w.maxGap.Load()).Round(time.Millisecond), st.FiredTotal, st.DroppedTotal)
}

// chaosCleanup binds every shared receiver, cancels its timers, reads its
// backlog (which comes as the connection drains, ahead of newer events) and
// unbinds it: its record is then forgotten.
func chaosCleanup(t *testing.T, admin *rawClient) {
	t.Helper()
	for r := uint64(1); r <= chaosPool; r++ {
		backlog, _ := admin.bind(r, false)
		admin.uints(protocol.Request{Op: protocol.OpCancelAll, Receiver: r})
		for n := uint64(0); ; {
			for _, f := range admin.fires() {
				if f.Receiver == r {
					n++
				}
			}
			if n >= backlog {
				break
			}
			m, err := admin.read()
			require.NoError(t, err, "receiver %d's backlog: %d of %d events", r, n, backlog)
			admin.events = append(admin.events, m)
		}
		admin.uints(protocol.Request{Op: protocol.OpUnbind, Receiver: r})
		admin.takeEvents()
	}
}

// chaosBaseline waits until goroutines, open fds (where /proc/self/fd
// exists) and the heap are back to their baselines.
func chaosBaseline(t *testing.T, baseG, baseFD int, baseHeap uint64) {
	t.Helper()
	const within, heapSlack = 15 * time.Second, 32 << 20
	g := 0
	if !chaosEventually(within, func() bool { g = len(chaosGoroutines()); return g <= baseG }) {
		t.Errorf("goroutines: %d, baseline %d\n%s", g, baseG, bytes.Join(chaosGoroutines(), []byte("\n\n")))
	}
	fds := 0
	if baseFD >= 0 && !chaosEventually(within, func() bool { fds = chaosFDs(); return fds <= baseFD }) {
		t.Errorf("open fds: %d, baseline %d", fds, baseFD)
	}
	heap := uint64(0)
	if !chaosEventually(within, func() bool { heap = chaosHeap(); return heap <= baseHeap+heapSlack }) {
		t.Errorf("heap: %d MiB, baseline %d MiB", heap>>20, baseHeap>>20)
	}
	t.Logf("after: %d goroutines (baseline %d), %d fds (baseline %d), heap %d KiB (baseline %d KiB)",
		g, baseG, fds, baseFD, heap>>10, baseHeap>>10)
}

// chaosRun is the state shared by the chaos clients.
type chaosRun struct {
	addr    string
	end     time.Time
	log     chaosLog
	nextEph atomic.Uint64

	conns, rsts, midFrame, silent, graceful atomic.Int64
	serverClosed, events, takeovers         atomic.Int64
	maxLeave                                atomic.Int64 // the longest leave, as a time.Duration
}

// chaosSession is one chaos client connection.
type chaosSession struct {
	run *chaosRun
	c   *chaosConn
	// recv holds the receivers this session was told it bound and has not
	// lost to a takeover or unbound.
	recv map[uint64]*chaosRecv
}

// chaosRecv is a receiver as the session holding it sees it.
type chaosRecv struct {
	seq     uint64 // the last event's seq, 0 before the first
	dropped uint64 // events its bind reported dropped, not yet seen as gaps
}

// event checks the seq of the receiver's next event: it increases, and
// skips only events the bind reported as dropped (before the first event
// of a binding, the gap is not this session's to know).
func (r *chaosRecv) event(seq uint64) error {
	switch {
	case seq <= r.seq:
		return fmt.Errorf("seq %d after %d", seq, r.seq)
	case r.seq != 0 && seq-r.seq-1 > r.dropped:
		return fmt.Errorf("seq %d after %d while bound: %d events missing, %d reported dropped", seq, r.seq, seq-r.seq-1, r.dropped)
	case r.seq != 0:
		r.dropped -= seq - r.seq - 1
	}
	r.seq = seq
	return nil
}

// session runs one client from its connect to its disconnect.
func (r *chaosRun) session(rng *rand.Rand) {
	kind := rng.IntN(100)
	silent, midFrame, graceful := kind < 15, kind >= 15 && kind < 30, kind >= 30 && kind < 40
	rcvbuf, life := 0, time.Duration(rng.Int64N(int64(chaosMaxLife)))
	if silent {
		rcvbuf, life = 4096, time.Duration(rng.Int64N(int64(chaosSilentLife)))
	}
	c, err := chaosDial(r.addr, rcvbuf)
	if err != nil {
		r.log.add("dial: %v", err)
		time.Sleep(10 * time.Millisecond)
		return
	}
	r.conns.Add(1)
	s := &chaosSession{run: r, c: c, recv: make(map[uint64]*chaosRecv)}
	if err := c.write(s.plan(rng, silent)); err != nil {
		r.log.add("writing the first requests: %v", err)
	}
	until := time.Now().Add(life)
	if until.After(r.end) {
		until = r.end
	}
	open := true
	if silent {
		r.silent.Add(1)
		time.Sleep(time.Until(until))
	} else {
		open = s.readUntil(until, false)
	}
	switch {
	case midFrame:
		r.midFrame.Add(1)
		req := protocol.AppendRequest(nil, &protocol.Request{Op: protocol.OpAdd, ID: c.id + 1, Receiver: chaosEphBase, Tid: 1, After: 1})
		_ = c.write(req[:1+rng.IntN(len(req)-1)])
	case graceful && open:
		r.graceful.Add(1)
		s.leave()
	}
	if rng.IntN(4) == 0 {
		r.rsts.Add(1)
		_ = c.c.SetLinger(0)
	}
	c.c.Close()
}

// plan returns the session's first requests: hello, then one or two binds,
// each followed by the add of a timer firing every tick. A silent session
// binds a fresh ephemeral receiver whose timer carries 2 KiB of data.
func (s *chaosSession) plan(rng *rand.Rand, silent bool) []byte {
	c := s.c
	b := c.append(nil, protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Name: "chaos"})
	for i := range 1 + rng.IntN(2) {
		if (silent && i == 0) || rng.IntN(3) == 0 {
			id := chaosEphBase + s.run.nextEph.Add(1)
			var data []byte
			if silent {
				data = make([]byte, 2048)
			}
			b = c.append(b, protocol.Request{Op: protocol.OpBind, Receiver: id, Ephemeral: true})
			b = c.append(b, protocol.Request{Op: protocol.OpAdd, Receiver: id, Tid: 1, After: 1, Data: data})
			continue
		}
		// A shared receiver: timers that end by themselves (they outlive
		// the session), replacing what an earlier client left.
		id := 1 + rng.Uint64N(chaosPool)
		b = c.append(b, protocol.Request{Op: protocol.OpBind, Receiver: id})
		b = c.append(b, protocol.Request{Op: protocol.OpAdd, Receiver: id, Tid: 1 + rng.Uint64N(2), After: 1,
			Repeat: 50 + rng.Uint64N(450), Replace: true, Data: []byte("shared")})
	}
	return b
}

// readUntil reads and checks messages until until, or with answered until
// every request has its reply, and reports whether the connection is still
// open (false: the server closed it, or a check failed).
func (s *chaosSession) readUntil(until time.Time, answered bool) bool {
	s.c.c.SetReadDeadline(until)
	var m protocol.Message
	for !answered || len(s.c.sent) > 0 {
		if err := s.c.read(&m); err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				return true
			case errors.Is(err, errChaosDecode):
				s.run.log.add("%v", err)
			default: // EOF or reset
				s.run.serverClosed.Add(1)
			}
			return false
		}
		if err := s.check(&m); err != nil {
			s.run.log.add("%v", err)
			return false
		}
	}
	return true
}

// check checks one message against what the session sent and holds.
func (s *chaosSession) check(m *protocol.Message) error {
	switch m.Kind {
	case protocol.KindOK, protocol.KindError:
		req, err := s.c.reply(m)
		if err != nil {
			return err
		}
		switch req.op {
		case protocol.OpBind:
			v, err := protocol.DecodeUints(m.Result, nil)
			if err != nil || len(v) != 3 {
				return fmt.Errorf("bind result %v: %v", v, err)
			}
			r := s.recv[req.receiver]
			if r == nil {
				r = &chaosRecv{}
				s.recv[req.receiver] = r
			}
			r.dropped += v[1]
		case protocol.OpUnbind:
			delete(s.recv, req.receiver)
		}
	case protocol.KindFire:
		s.run.events.Add(1)
		f := &m.Fire
		r := s.recv[f.Receiver]
		if r == nil {
			return fmt.Errorf("event for receiver %d, which this session does not hold", f.Receiver)
		}
		if err := r.event(f.Seq); err != nil {
			return fmt.Errorf("receiver %d: %v", f.Receiver, err)
		}
	case protocol.KindTakeover:
		s.run.takeovers.Add(1)
		if s.recv[m.Receiver] == nil {
			return fmt.Errorf("takeover of receiver %d, which this session does not hold", m.Receiver)
		}
		delete(s.recv, m.Receiver)
	default:
		return fmt.Errorf("message of kind %s", m.Kind)
	}
	return nil
}

// leave cancels the timers of the shared receivers the session holds and
// unbinds them, and reads until every reply is in.
func (s *chaosSession) leave() {
	c := s.c
	var b []byte
	for id := range s.recv {
		if id <= chaosPool {
			b = c.append(b, protocol.Request{Op: protocol.OpCancelAll, Receiver: id})
			b = c.append(b, protocol.Request{Op: protocol.OpUnbind, Receiver: id})
		}
	}
	if err := c.write(b); err != nil {
		s.run.log.add("leave: %v", err)
		return
	}
	began := time.Now()
	if s.readUntil(began.Add(chaosStall), true) && len(c.sent) > 0 {
		s.run.log.add("leave: %d replies missing after %v", len(c.sent), chaosStall)
	}
	if took := time.Since(began); took > time.Duration(s.run.maxLeave.Load()) {
		s.run.maxLeave.Store(int64(took)) // racy max: a log figure only
	}
}

// chaosWatcher is the well-behaved session: it reads all the time, and its
// timer's events must arrive in order with no gap, never chaosStall apart.
type chaosWatcher struct {
	c       *rawClient
	events  atomic.Int64
	maxGap  atomic.Int64
	log     chaosLog
	closing atomic.Bool
	done    chan struct{}
}

func startChaosWatcher(t *testing.T, srv *Server) *chaosWatcher {
	t.Helper()
	c := helloToken(t, srv, "watcher", "")
	c.bind(chaosWatchRecv, false)
	c.add(protocol.Request{Receiver: chaosWatchRecv, Tid: 1, After: chaosWatchEvery})
	c.wait = chaosStall
	w := &chaosWatcher{c: c, done: make(chan struct{})}
	go w.run()
	t.Cleanup(func() {
		w.closing.Store(true)
		c.conn.Close()
		<-w.done
	})
	return w
}

func (w *chaosWatcher) run() {
	defer close(w.done)
	var prev protocol.Fire
	last := time.Now()
	for {
		m, err := w.c.read() // a read waits chaosStall at most: a stall is an error
		if err != nil {
			if !w.closing.Load() {
				w.log.add("watcher, %v after its last event: %v", time.Since(last), err)
			}
			return
		}
		if gap := time.Since(last); gap > time.Duration(w.maxGap.Load()) {
			w.maxGap.Store(int64(gap))
		}
		last = time.Now()
		f := m.Fire
		if m.Kind != protocol.KindFire || f.Receiver != chaosWatchRecv {
			w.log.add("watcher: unexpected %s message", m.Kind)
			continue
		}
		if prev.Seq != 0 && (f.Seq != prev.Seq+1 || f.Fired != prev.Fired+1 || f.Tick != prev.Tick+chaosWatchEvery) {
			w.log.add("watcher: seq %d fired %d tick %d after seq %d fired %d tick %d",
				f.Seq, f.Fired, f.Tick, prev.Seq, prev.Fired, prev.Tick)
		}
		prev = f
		w.events.Add(1)
	}
}

// chaosLeftovers describes the server's receiver records other than except.
func chaosLeftovers(t *testing.T, srv *Server, except uint64) []string {
	t.Helper()
	var out []string
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	require.NoError(t, srv.onLoop(ctx, func() {
		for _, r := range srv.core.Receivers() {
			if r.ID != except {
				out = append(out, fmt.Sprintf("%d: backlog %d, timers %d, bound %v, ephemeral %v",
					r.ID, r.Backlog, r.Timers, r.Bound, r.Ephemeral))
			}
		}
	}))
	return out
}
